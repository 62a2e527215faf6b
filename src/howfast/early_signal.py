"""A Ctrl-C that comes while howfast loads its modules must not be lost, nor print a traceback.

Python turns SIGINT into KeyboardInterrupt wherever the main thread happens to be. Raised
inside an object's __del__ or a weakref callback (importlib's module locks have one), it
cannot propagate: Python prints it as "Exception ignored in ..." with a traceback and goes
on. The handler installed first thing (howfast/__main__.py) therefore remembers the signal,
the unraisable hook keeps such a KeyboardInterrupt quiet, and whoever comes next acts on
`received`: __main__ once the modules are loaded, a run's SignalGuard when it starts.

Only `_signal` and `sys` are imported here: `signal` and `typing` load enum, functools and
collections first (30 ms), and a Ctrl-C then was a traceback.
"""

import _signal  # type: ignore[import-not-found]  # no stub: `signal`'s own C half
import sys

received: str | None = None  # the name of the first signal that came before a run's guard


def _handler(signum: int, frame: object) -> None:
    global received
    received = received or "SIGINT"  # the only signal handled here
    raise KeyboardInterrupt


def _unraisable(unraisable: "sys.UnraisableHookArgs") -> None:  # a type for checkers only
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and received:
        return  # remembered in `received`, acted on where it can be
    sys.__unraisablehook__(unraisable)


def install() -> None:
    _signal.signal(_signal.SIGINT, _handler)
    sys.unraisablehook = _unraisable
