"""Sizing pgbench's dataset for a working-set regime (issue: in-memory vs on-disk).

Whether a test is in memory or on disk decides everything, so the regime is explicit and the
scale is computed from the memory PostgreSQL can use and the size one scale unit really takes
on this server (measured, not guessed). Pure: callers measure and pass the numbers in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from howfast.errors import UsageError
from howfast.units import parse_size, quote, size_bytes

REGIMES = ("in-buffers", "in-memory", "on-disk")
# Fractions of the memory that bound each regime's database size.
IN_BUFFERS_FRACTION = 0.7  # leave shared_buffers room for the catalog, WAL buffers, temp
IN_MEMORY_LOW = 1.5  # clearly beyond shared_buffers ...
IN_MEMORY_HIGH = 0.6  # ... and clearly inside the page cache, with room for the rest
ON_DISK_FACTOR = 4.0  # the "latency is the #1 metric" study's 4x memory


@dataclass(frozen=True)
class DatasetPlan:
    regime: str  # in-buffers | in-memory | on-disk | size
    scale: int
    target_bytes: int  # what the regime asked for
    expected_bytes: int  # what the chosen scale should give
    bytes_per_scale: int
    memory_bytes: int
    shared_buffers_bytes: int
    note: str


def parse_dataset(text: str) -> tuple[str, int | None]:
    """'on-disk' -> ('on-disk', None); '20GiB' -> ('size', bytes)."""
    if text in REGIMES:
        return text, None
    try:
        return "size", parse_size(text, "--dataset")
    except UsageError:
        raise UsageError(
            f"--dataset {text!r}: expected {', '.join(REGIMES)} or a size such as 20GiB"
        ) from None


def dataset_value(value: str) -> str:
    """A working-set regime (in-buffers, in-memory, on-disk) or a size such as "20GiB", as
    written; ValueError, in a plan file's words, otherwise."""
    if value in REGIMES:
        return value
    try:
        size_bytes(value)
    except ValueError:
        raise ValueError(
            f"{quote(value)}: expected {', '.join(REGIMES)} or a size such as 20GiB"
        ) from None
    return value


def target_bytes(regime: str, *, memory_bytes: int, shared_buffers_bytes: int) -> int:
    if regime == "in-buffers":
        return int(IN_BUFFERS_FRACTION * shared_buffers_bytes)
    if regime == "in-memory":
        low = IN_MEMORY_LOW * shared_buffers_bytes
        high = IN_MEMORY_HIGH * memory_bytes
        if low > high:
            raise UsageError(
                f"no in-memory size fits: shared_buffers ({_gib(shared_buffers_bytes)}) is "
                f"too large for the memory available ({_gib(memory_bytes)})",
                "lower shared_buffers with --set or raise --memory",
            )
        # The middle of the band on a log scale: as far from both edges as possible.
        return int(math.sqrt(low * high))
    if regime == "on-disk":
        return int(ON_DISK_FACTOR * memory_bytes)
    raise ValueError(f"unknown regime {regime!r}")


def plan_dataset(
    regime: str,
    *,
    explicit_bytes: int | None = None,
    memory_bytes: int,
    shared_buffers_bytes: int,
    bytes_per_scale: int,
    base_bytes: int = 0,
) -> DatasetPlan:
    """The scale for `regime`. `bytes_per_scale` is measured (database size growth per scale
    unit), `base_bytes` the size of an empty database."""
    if bytes_per_scale <= 0:
        raise ValueError("bytes_per_scale must be measured and positive")
    if regime == "size":
        if explicit_bytes is None:
            raise ValueError("an explicit size is needed")
        want = explicit_bytes
        note = f"explicit size {_gib(want)}"
    else:
        want = target_bytes(
            regime, memory_bytes=memory_bytes, shared_buffers_bytes=shared_buffers_bytes
        )
        note = (
            f"{regime}: target {_gib(want)} for {_gib(memory_bytes)} of memory and "
            f"shared_buffers {_gib(shared_buffers_bytes)}"
        )
    scale = max(1, round((want - base_bytes) / bytes_per_scale))
    if regime == "in-buffers" and base_bytes + scale * bytes_per_scale > want and scale > 1:
        scale -= 1  # stay inside shared_buffers rather than round over it
    return DatasetPlan(
        regime=regime,
        scale=scale,
        target_bytes=want,
        expected_bytes=base_bytes + scale * bytes_per_scale,
        bytes_per_scale=bytes_per_scale,
        memory_bytes=memory_bytes,
        shared_buffers_bytes=shared_buffers_bytes,
        note=note,
    )


def _gib(n: float) -> str:
    return f"{n / 1024**3:.2f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"
