"""The one clock for stored timestamps: UTC, ISO 8601, milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
