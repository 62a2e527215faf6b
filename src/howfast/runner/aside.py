"""A target's stop in a thread of its own, beside the next target's start (issue 34): on
Kubernetes, stopping is mostly waiting for the API server to delete pods and volumes, and
starting the next target is mostly waiting for its pod; one after the other they were 14 s
between two targets of the lab.

    aside = session.close_aside()     # the stop begins
    next_session.open()               # the next target starts meanwhile
    aside.wait()                      # before its first step: nothing of the stop runs
                                      # while a step measures

The thread is not a daemon: howfast does not exit before the target is stopped. The stop's
messages (a warning, what was kept) are told from the thread that waits, in order."""

from __future__ import annotations

import threading
from collections.abc import Callable

from howfast.observer import RunObserver

JOIN_SLICE_S = 0.2  # the waiting thread stays responsive to signals between slices


class StoppingAside:
    def __init__(self, stop: Callable[[], list[str]], observer: RunObserver) -> None:
        self.observer = observer
        self._stop = stop
        self._messages: list[str] = []
        self._told = False
        self._thread = threading.Thread(target=self._run, name="howfast-stop-aside")
        self._thread.start()

    def _run(self) -> None:
        try:
            self._messages = self._stop()
        except Exception as exc:  # told by wait(), as a stop in the main thread would be
            self._messages = [f"warning: stopping failed: {exc}"]

    def wait(self) -> None:
        """Until the stop has ended; then its messages, once."""
        while self._thread.is_alive():
            self._thread.join(JOIN_SLICE_S)
        if not self._told:
            self._told = True
            for message in self._messages:
                self.observer.message(message)
