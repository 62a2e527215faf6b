"""A Ctrl-C that comes while howfast loads its modules must not be lost.

Python turns SIGINT into KeyboardInterrupt wherever the main thread happens to be; raised
inside an object's __del__ (collected during an import, say) it is printed as "ignored" and
dropped, and the run went on (seen in the Ctrl-C-while-loading test). The handler installed
first thing (howfast/__main__.py) also remembers the signal, and a run's SignalGuard aborts at
once when one already came.
"""

from __future__ import annotations

import signal
from types import FrameType

received: str | None = None  # the name of the first signal that came before a run's guard


def _handler(signum: int, frame: FrameType | None) -> None:
    global received
    received = received or signal.Signals(signum).name
    raise KeyboardInterrupt


def install() -> None:
    signal.signal(signal.SIGINT, _handler)
