"""Cancellation as an object: a token that the signal handler sets and every tool watches.

The runner's signal handler still raises `Aborted` in the main thread (so that a query or a
start-up in progress stops at once, as before); the token is how a tool started from any other
thread learns that it must stop too, and it carries the reason (the signal's name).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from howfast.errors import Aborted


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None
        # Re-entrant: cancel() may run in a signal handler of the thread registering a callback.
        self._lock = threading.RLock()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self, reason: str) -> None:
        """Ask everything that watches this token to stop; the first reason is kept. The
        callbacks run here, so they must be quick (send a signal, set a flag)."""
        if self.reason is None:
            self.reason = reason
        self._event.set()
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` when the token is cancelled (at once if it already is); returns
        the function that unregisters it. Lets a waiter block without polling."""
        with self._lock:
            self._callbacks.append(callback)
        if self.cancelled:
            callback()

        def unregister() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return unregister

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float) -> bool:
        """Sleep up to `timeout_s`; True as soon as the token is cancelled."""
        return self._event.wait(timeout_s)

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise Aborted(self.reason or "cancelled")


class _Never(CancelToken):
    def cancel(self, reason: str) -> None:
        """A token nobody may cancel: shared, so it must stay unset."""

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        return lambda: None


NEVER: CancelToken = _Never()  # for callers outside a run (one-off tools, tests)
