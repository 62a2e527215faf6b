"""Signals during a run: the first SIGINT/SIGTERM/SIGHUP/SIGQUIT cancels the run's token (every tool
watching it stops, from any thread) and raises Aborted in the main thread; later ones while
cleaning up only say that cleanup is under way.

Handlers can only be installed by the main thread: a run driven from another thread (a test
calling the CLI in-process from a worker) installs none, and is stopped by cancelling its
token, given by the caller (`SignalGuard(observer, cancel)`)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from howfast import early_signal
from howfast.cancel import CancelToken
from howfast.errors import Aborted
from howfast.observer import RunObserver

# SIGQUIT (Ctrl-\) too: by default it would kill howfast and leave the server behind.
HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class SignalGuard:
    def __init__(self, observer: RunObserver, cancel: CancelToken | None = None) -> None:
        self.observer = observer
        self.cancel = CancelToken() if cancel is None else cancel
        self.cleaning = False
        self.received: str | None = None
        self.critical_depth = 0
        self.pending: str | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.cleaning or self.received:
            self.observer.message(f"{name} received: still cleaning up, please wait")
            return
        if self.critical_depth:
            self.pending = name  # raised when the critical section ends
            return
        self._abort(name)

    def _abort(self, name: str) -> None:
        self.received = name
        self.cancel.cancel(name)
        raise Aborted(name)

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        """Defer the abort while stopping a server or writing a step: half of either would
        leave a process running or a step half-stored."""
        self.critical_depth += 1
        try:
            yield
        finally:
            self.critical_depth -= 1
        if not self.critical_depth and self.pending and not self.received:
            name, self.pending = self.pending, None
            self._abort(name)

    def check(self) -> None:
        """Abort between steps when the token was cancelled without a signal (another thread
        stopped the run): a tool in flight stops by itself, this stops what comes next."""
        if self.cancel.cancelled and not self.received and not self.cleaning:
            self._abort(self.cancel.reason or "cancelled")

    @contextlib.contextmanager
    def installed(self) -> Iterator[SignalGuard]:
        if threading.current_thread() is not threading.main_thread():
            yield self  # signal.signal would raise ValueError: the token stops this run
            return
        previous = {s: signal.getsignal(s) for s in HANDLED}
        for s in previous:
            signal.signal(s, self.handler)
        try:
            if early_signal.received and not self.received:  # a Ctrl-C that was swallowed
                self._abort(early_signal.received)
            yield self
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
