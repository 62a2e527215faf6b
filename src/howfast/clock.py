"""The one clock for stored timestamps: UTC, ISO 8601, milliseconds. A `Clock` is injected
where runs are stored (the CLI's environment, the run service, the runner), so that a test
can fix the timestamps; how long a step lasts is measured with the monotonic clock instead."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> str:
        """The time now, as stored: `2025-01-31T12:00:00.000+00:00`."""
        ...


class SystemClock:
    def now(self) -> str:
        return datetime.now(UTC).isoformat(timespec="milliseconds")


SYSTEM_CLOCK: Clock = SystemClock()


def now() -> str:
    return SYSTEM_CLOCK.now()
