"""Whether a pgbench step's reads match the working-set regime its data was sized for.

A "disk" benchmark that never reads the disk is the classic mistake, so each step on data
loaded for a regime (`--dataset`) is checked against what PostgreSQL read from the data device
(its own reads where its cgroup counted them, else the whole device's):

- on-disk (the database is 4x the memory): at least some of PostgreSQL's reads must reach
  the device. The step is suspect when the device read less than ON_DISK_MIN_SHARE (1%) of
  the database AND less than ON_DISK_MIN_OS_SHARE (10%) of the blocks PostgreSQL asked the
  OS for (pg_stat_database.blks_read), or shared_buffers served at least
  ON_DISK_MAX_HIT_RATIO (99%) of the reads. The second condition keeps a short step on slow
  storage, which reads a small part of a large database but reads it all from the device,
  from being flagged; the hit ratio catches a workload whose hot rows never leave
  shared_buffers (it asks the OS for almost nothing, so the first test cannot tell).
- in-memory and in-buffers (the database fits in memory): the device should read little.
  The step is suspect when it read more than IN_MEMORY_MAX_SHARE (10%) of the database.

Pure: it reads a step's metrics and sections. Steps whose data device is not visible (an
existing server, tmpfs) get no verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from howfast.model import JSONValue

PAGE_BYTES = 8192  # PostgreSQL's block size as built almost everywhere
ON_DISK_MIN_SHARE = 0.01
ON_DISK_MIN_OS_SHARE = 0.10
ON_DISK_MAX_HIT_RATIO = 0.99  # shared_buffers served 99% of the reads: memory did
IN_MEMORY_MAX_SHARE = 0.10
FITS_IN_MEMORY = ("in-memory", "in-buffers")


def os_read_bytes(sections: Mapping[str, Any]) -> int | None:
    """Bytes PostgreSQL read through the OS (blocks that missed shared_buffers)."""
    postgres = sections.get("postgres")
    views = postgres.get("views") if isinstance(postgres, Mapping) else None
    database = views.get("pg_stat_database") if isinstance(views, Mapping) else None
    blocks = database.get("blks_read") if isinstance(database, Mapping) else None
    return int(blocks) * PAGE_BYTES if isinstance(blocks, int | float) else None


def regime_warnings(
    dataset: str | None,
    db_bytes: int | None,
    metrics: Mapping[str, JSONValue],
    sections: Mapping[str, Any],
) -> list[str]:
    # PostgreSQL's own reads of the data device where its cgroup counted them: on a shared
    # disk the device's count everyone's, which would hide a step served by memory.
    own = metrics.get("pg_io_data_read_bytes")
    device = own if isinstance(own, int | float) else metrics.get("io_data_read_bytes")
    if not db_bytes or not isinstance(device, int | float):
        return []
    hit = metrics.get("cache_hit_ratio")
    hit_text = f", cache hit ratio {hit:.3f}" if isinstance(hit, int | float) else ""
    if dataset == "on-disk":
        from_os = os_read_bytes(sections)
        buffers_served = isinstance(hit, int | float) and hit >= ON_DISK_MAX_HIT_RATIO
        if device < ON_DISK_MIN_SHARE * db_bytes and (
            from_os is None or device <= ON_DISK_MIN_OS_SHARE * from_os or buffers_served
        ):
            return [
                f"an on-disk step read (almost) nothing from the device: {_size(device)} for "
                f"a {_size(db_bytes)} database{hit_text}. Memory served the reads, so this is "
                "not an on-disk figure: what the test reads fits in memory (its hot rows, or "
                "a machine with more memory than the data was sized for; cap that with "
                "--memory)"
            ]
    elif dataset in FITS_IN_MEMORY and device > IN_MEMORY_MAX_SHARE * db_bytes:
        return [
            f"an {dataset} step read {_size(device)} from the device, "
            f"{device / db_bytes:.0%} of the {_size(db_bytes)} database{hit_text}: the data was "
            "not all in memory (a cold cache, or less memory than it was sized for); "
            "a warm-up run first (warmup in the plan) fills the caches"
        ]
    return []


def _size(n: float) -> str:
    if n >= 1024**3:
        return f"{n / 1024**3:.2f} GiB"
    return f"{n / 1024**2:.1f} MiB"
