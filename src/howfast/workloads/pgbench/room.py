"""How much room `pgbench -i` takes at its peak, and whether the target's filesystems have it.
Pure: the executor (dataset.py) measures or reads the figures, this adds them up.

At the peak of a load, while the last primary key is built, the data directory holds the
tables, their indexes and the sort's temporary files (base/pgsql_tmp: about the size of the
index being built, even at scale 1, since the parallel workers' sorts spill), and pg_wal holds
every byte of WAL the load wrote since the last checkpoint: with wal_level replica or logical,
about one byte of WAL per byte of table and index. pg_wal stops growing only when checkpoints
recycle it, near max_wal_size (plus wal_keep_size, which keeps that much more for standbys); an
archive_mode that is on keeps WAL until it is archived, so then nothing bounds it. A load
whose WAL fills the disk makes the server PANIC.
"""

from __future__ import annotations

from dataclasses import dataclass

from howfast.units import format_bytes

MIB = 2**20
MARGIN = 1.10  # the filesystem's own blocks, free-space maps, catalogs: room over the sum


@dataclass(frozen=True)
class UnitCost:
    """What one scale unit of `pgbench -i` takes: its tables, their primary keys, and the WAL
    loading them writes."""

    table_bytes: int
    index_bytes: int
    wal_bytes: int
    measured: bool = True

    @property
    def data_bytes(self) -> int:
        return self.table_bytes + self.index_bytes


# Measured on PostgreSQL 15 at the default fillfactor (tables 12.9 MiB, primary keys 2.2 MiB,
# 12.5 MiB of WAL per scale unit, wal_level replica), rounded up: what a load is taken to need
# before one scale unit is measured on the target.
GENEROUS_UNIT = UnitCost(14 * MIB, 3 * MIB, 14 * MIB, measured=False)


def generous_unit(fillfactor: object = 100) -> UnitCost:
    """GENEROUS_UNIT for a load's fillfactor: a table filled to 10% takes ten times the room
    (its WAL is counted as growing alike, on the safe side)."""
    fill = fillfactor if isinstance(fillfactor, int) and 0 < fillfactor <= 100 else 100
    spread = 100 / fill
    return UnitCost(
        int(GENEROUS_UNIT.table_bytes * spread),
        GENEROUS_UNIT.index_bytes,
        int(GENEROUS_UNIT.wal_bytes * spread),
        measured=False,
    )


@dataclass(frozen=True)
class WalBounds:
    """What bounds pg_wal's growth on the target, and what it holds now."""

    max_wal_size: int | None  # None: not known, WAL is then counted in full
    wal_keep_size: int = 0
    archiving: bool = False  # archive_mode on: kept until archived, nothing bounds it
    in_pg_wal: int = 0

    def growth(self, written: int) -> int:
        """How much pg_wal grows, at most, while `written` bytes of WAL are written."""
        if self.archiving or self.max_wal_size is None:
            return written
        ceiling = self.max_wal_size + self.wal_keep_size
        return max(0, min(self.in_pg_wal + written, ceiling) - self.in_pg_wal)

    def describe(self) -> str:
        if self.archiving:
            return "archive_mode is on: kept until archived"
        if self.max_wal_size is None:
            return "max_wal_size unknown"
        text = f"max_wal_size {format_bytes(self.max_wal_size)}"
        if self.wal_keep_size:
            text += f" + wal_keep_size {format_bytes(self.wal_keep_size)}"
        return text


@dataclass(frozen=True)
class LoadNeed:
    """The room a load of `scale` takes at its peak, by filesystem."""

    scale: int
    unit: UnitCost
    wal_bounds: WalBounds
    tables: int
    indexes: int
    sort_files: int
    wal: int

    @property
    def data_bytes(self) -> int:
        """On the data directory's filesystem, without the WAL."""
        return int((self.tables + self.indexes + self.sort_files) * MARGIN)

    @property
    def wal_bytes(self) -> int:
        return int(self.wal * MARGIN)

    def parts(self, *, wal_apart: bool) -> str:
        """What the figure is made of, for a refusal."""
        basis = "measured" if self.unit.measured else "estimated before measuring"
        wal = f"{format_bytes(self.wal)} of WAL ({self.wal_bounds.describe()})"
        return (
            f"per scale unit, {basis}: {format_bytes(self.unit.data_bytes)} of tables and "
            f"primary keys, {format_bytes(self.unit.wal_bytes)} of WAL; in all "
            f"{format_bytes(self.tables + self.indexes)} of tables and keys, "
            f"{format_bytes(self.sort_files)} of sort files while the keys are built"
            + ("" if wal_apart else f", {wal}")
            + f", plus {MARGIN - 1:.0%}"
            + (f"; on the WAL's filesystem {wal}, plus {MARGIN - 1:.0%}" if wal_apart else "")
        )


def load_need(scale: int, unit: UnitCost, wal: WalBounds) -> LoadNeed:
    return LoadNeed(
        scale=scale,
        unit=unit,
        wal_bounds=wal,
        tables=scale * unit.table_bytes,
        indexes=scale * unit.index_bytes,
        # A primary key's sort spills about the index's own size (pgbench builds them one by
        # one; counting all of them is on the safe side).
        sort_files=scale * unit.index_bytes,
        wal=wal.growth(scale * unit.wal_bytes),
    )


@dataclass(frozen=True)
class Room:
    """Free bytes where the load goes; `wal_free` is None when the WAL shares the data's
    filesystem. `reclaimed`: what the load drops first (the pgbench tables already there)."""

    data_free: int
    wal_free: int | None = None
    reclaimed: int = 0

    @property
    def wal_apart(self) -> bool:
        return self.wal_free is not None


def shortfall(need: LoadNeed, room: Room) -> tuple[int, int, str] | None:
    """(bytes needed, bytes free, which filesystem) where the load does not fit; None when it
    fits everywhere."""
    data_free = room.data_free + room.reclaimed
    if room.wal_free is None:
        total = need.data_bytes + need.wal_bytes
        return (total, data_free, "data") if total > data_free else None
    if need.data_bytes > data_free:
        return need.data_bytes, data_free, "data"
    if need.wal_bytes > room.wal_free:
        return need.wal_bytes, room.wal_free, "wal"
    return None


def needs_measuring(need: LoadNeed, room: Room) -> bool:
    """Whether a generous estimate leaves doubt: more than half the free room. Below that,
    measuring one scale unit first would cost a load for nothing."""
    if room.wal_free is None:
        return 2 * (need.data_bytes + need.wal_bytes) > room.data_free + room.reclaimed
    return (
        2 * need.data_bytes > room.data_free + room.reclaimed or 2 * need.wal_bytes > room.wal_free
    )
