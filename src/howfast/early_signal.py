"""A Ctrl-C that comes while howfast loads its modules must not be lost, nor print a traceback.

Python turns SIGINT into KeyboardInterrupt wherever the main thread happens to be. Raised
inside an object's __del__ or a weakref callback (importlib's module locks have one), it
cannot propagate: Python prints it as "Exception ignored in ..." with a traceback and goes
on. The handler installed first thing (howfast/__main__.py) therefore remembers the signal,
the unraisable hook keeps such a KeyboardInterrupt quiet, and whoever comes next acts on
`received`: __main__ once the modules are loaded, a run's SignalGuard when it starts.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Any

received: str | None = None  # the name of the first signal that came before a run's guard


def _handler(signum: int, frame: FrameType | None) -> None:
    global received
    received = received or signal.Signals(signum).name
    raise KeyboardInterrupt


def _unraisable(unraisable: Any) -> None:
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and received:
        return  # remembered in `received`, acted on where it can be
    sys.__unraisablehook__(unraisable)


def install() -> None:
    signal.signal(signal.SIGINT, _handler)
    sys.unraisablehook = _unraisable
