"""The Sampler interface: something that watches the machine or the server during one step.

A sampler is started just before the workload runs and stopped just after it, whatever
happened. It returns a SamplerResult: per-interval series, a few metrics, warnings, events
(checkpoints) and its part of the step's JSON sections (`io`, `cpu`, `postgres`).

A sampler must never stop a step: what goes wrong in it becomes a warning (see `guarded`).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from howfast.model import JSONValue, Sample
from howfast.targets.base import Connection, Target

if TYPE_CHECKING:
    from howfast.samplers.own_connection import OwnConnections

DEFAULT_INTERVAL_S = 1.0
STOP_TIMEOUT_S = 5.0  # a sampler stuck longer than this is left behind (daemon thread)
# While an event keeps the service away, a sampler tries to resume at most this often (a
# 10 Hz sampler would otherwise fill the server log with refused connections).
RESUME_EVERY_S = 0.5


class ProcessTracker:
    """PIDs of the load generator (pgbench), told by the workload when it starts them, each
    with whatever the session read about it at that moment (its first CPU reading)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pids: dict[int, object] = {}

    def add(self, pid: int, first_reading: object = None) -> None:
        with self._lock:
            self._pids[pid] = first_reading

    def current(self) -> dict[int, object]:
        with self._lock:
            return dict(self._pids)


@dataclass
class SamplerContext:
    """What samplers may use. Times are seconds since the step started (monotonic clock)."""

    target: Target
    connection: Connection | None
    interval_s: float = DEFAULT_INTERVAL_S
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)  # the same instant, epoch seconds
    processes: ProcessTracker = field(default_factory=ProcessTracker)
    # When the session began stopping its samplers (seconds since the step started): the end
    # of the step's window for a sampler that reads history afterwards (--prometheus).
    stopping_at: float | None = None
    # Events (issue 29): whether an action that cuts connections (restart, crash, failover)
    # is under way or just ended. A reading that fails then is missed, not the sampler's end.
    disturbed: Callable[[], bool] = field(default=lambda: False)
    # The server howfast's own connections reach now (a failover promotes another); None:
    # always `connection`.
    connection_now: Callable[[], Connection | None] | None = None
    # The target's sampler connections, kept between its steps (own_connection.py); None:
    # each sampler opens and closes its own.
    own_connections: OwnConnections | None = None

    def now(self) -> float:
        return time.monotonic() - self.started

    def current_connection(self) -> Connection | None:
        return self.connection_now() if self.connection_now is not None else self.connection


@dataclass
class SamplerResult:
    series: dict[str, list[Sample]] = field(default_factory=dict)
    metrics: dict[str, JSONValue] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    events: list[dict[str, JSONValue]] = field(default_factory=list)
    # section name ("io", "cpu", "postgres") -> this sampler's keys in it
    sections: dict[str, dict[str, JSONValue]] = field(default_factory=dict)

    def merge(self, other: SamplerResult) -> None:
        self.series.update(other.series)
        self.metrics.update(other.metrics)
        self.warnings += other.warnings
        self.events += other.events
        for name, content in other.sections.items():
            self.sections.setdefault(name, {}).update(content)


class Sampler(ABC):
    name: str

    @abstractmethod
    def start(self, ctx: SamplerContext) -> None:
        """Take the first reading and begin sampling; return at once."""

    @abstractmethod
    def stop(self) -> SamplerResult:
        """Take the last reading, stop, and say what was seen. Never raises."""


class PeriodicSampler(Sampler):
    """A sampler with its own background thread that calls `tick` every interval.

    Subclasses implement begin (first reading; may raise: the sampler is then off, with a
    warning), tick (one reading at t seconds) and result (after the last tick). A tick that
    fails turns the sampler off with a warning; what it had read is kept. Unless an event
    disturbs the service (ctx.disturbed()): the reading is then missed (`missed_readings`),
    and the next one first calls `resume` (a PostgreSQL sampler reconnects to the current
    primary), so the sampler's series have a gap over the outage instead of ending there.
    """

    # Its own pace, when it samples faster than the other samplers (wait events: 10 Hz);
    # None: the session's interval.
    interval_s: float | None = None

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ctx: SamplerContext | None = None
        self._failure: str | None = None
        self._lost = False  # a reading failed while disturbed: resume before the next one
        self._tried_at = -RESUME_EVERY_S  # when it last tried to resume (step seconds)
        self.missed_readings = 0  # readings that failed while an event disturbed the service
        self.reconnects = 0  # resumes that made a new connection

    def resume(self, ctx: SamplerContext) -> bool:
        """Before the first reading after a missed one: make the sampler able to read again
        (a new connection to ctx.current_connection()). True when it reconnected; may raise
        (still disturbed: one more missed reading)."""
        return False

    @abstractmethod
    def begin(self, ctx: SamplerContext) -> None: ...

    @abstractmethod
    def tick(self, t: float) -> None: ...

    @abstractmethod
    def result(self) -> SamplerResult: ...

    def settle(self) -> None:
        """Called once the workload has ended, before the last reading."""

    def start(self, ctx: SamplerContext) -> None:
        self._ctx = ctx
        with self._guarded("could not start"):
            self.begin(ctx)
        if self._failure is None:
            self._thread = threading.Thread(
                target=self._run, name=f"howfast-sampler-{self.name}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        assert self._ctx is not None
        interval = self.interval_s or self._ctx.interval_s
        # Ticks on a fixed grid (interval, 2 x interval, ...) so that a slow reading does
        # not shift every later one.
        n = 1
        while not self._stop.wait(max(0.0, n * interval - self._ctx.now())):
            if not self._reading(self._ctx.now(), "stopped"):
                return
            n = max(n + 1, int(self._ctx.now() / interval) + 1)

    def _reading(self, t: float, what: str, *, last: bool = False) -> bool:
        """One reading (resumed first after a missed one; the last also settles); False when
        it failed and the sampler is off."""
        assert self._ctx is not None
        if self._lost and not last and t - self._tried_at < RESUME_EVERY_S:
            self.missed_readings += 1  # too soon to try again
            return True
        resuming = self._lost
        try:
            if resuming:
                self._tried_at = t
                if self.resume(self._ctx):
                    self.reconnects += 1
                self._lost = False
            if last:
                self.settle()
            self.tick(t)
        except Exception as exc:  # permission, a vanished file, a lost connection...
            if self._ctx.disturbed():
                self.missed_readings += 1
                self._lost = True
                return True
            if self._failure is None:
                after = " after an event cut its connection" if resuming else ""
                self._failure = f"sampler {self.name} {what}{after}: {describe_failure(exc)}"
            return False
        return True

    @property
    def finished(self) -> bool:
        """Whether its thread has ended (or never ran): nothing of it reads any more."""
        return self._thread is None or not self._thread.is_alive()

    def stop(self) -> SamplerResult:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S)
            if self._thread.is_alive():
                return SamplerResult(
                    warnings=[f"sampler {self.name} did not stop in time; its samples are lost"]
                )
            if self._failure is None and self._ctx is not None:
                self._reading(self._ctx.now(), "missed its last reading", last=True)
        try:
            out = self.result()
        except Exception as exc:  # a bug in a summary must not lose the step
            out = SamplerResult(warnings=[f"sampler {self.name} failed: {describe_failure(exc)}"])
        if self._failure:
            out.warnings.insert(0, self._failure)
        return out

    @contextmanager
    def _guarded(self, what: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:  # permission, a vanished file, a lost connection...
            if self._failure is None:
                self._failure = f"sampler {self.name} {what}: {describe_failure(exc)}"


def describe_failure(exc: BaseException) -> str:
    """One line saying why, never empty: the message's first line, with the next when it
    ends in a colon (the cause comes after it), else the exception's type."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    first = lines[0]
    if first.endswith(":"):
        cause = lines[1] if len(lines) > 1 else f"no reason given ({type(exc).__name__})"
        return f"{first} {cause}"
    return first
