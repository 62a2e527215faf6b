"""Cancellation as an object: a token that the signal handler sets and every tool watches.

The runner's signal handler still raises `Aborted` in the main thread (so that a query or a
start-up in progress stops at once, as before); the token is how a tool started from any other
thread learns that it must stop too, and it carries the reason (the signal's name).
"""

from __future__ import annotations

import threading

from howfast.errors import Aborted


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None

    def cancel(self, reason: str) -> None:
        """Ask everything that watches this token to stop; the first reason is kept."""
        if self.reason is None:
            self.reason = reason
        self._event.set()

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


NEVER: CancelToken = _Never()  # for callers outside a run (one-off tools, tests)
