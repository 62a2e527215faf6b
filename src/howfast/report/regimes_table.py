"""The `regimes` table: one row per target with the four numbers, then what each stands on."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from howfast.analysis.regimes import RegimeRow, RegimeTps, regimes_rows
from howfast.model import RunRecord
from howfast.units import human_bytes


def _f(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _tps_note(regime: str, got: RegimeTps) -> str:
    runs = f", mean of {got.runs} runs" if got.runs > 1 else ""
    scale = f", scale {got.scale:,}" if got.scale is not None else ""
    return f"{regime} TPS: pgbench {got.mode}, {got.clients} clients{scale}{runs}"


def row_notes(row: RegimeRow) -> list[str]:
    """What each figure of a row stands on, one short line each."""
    notes = [_tps_note(regime, got) for regime, got in row.tps.items()]
    if row.load is not None:
        load = row.load
        size = f", {human_bytes(load.db_size_bytes)}" if load.db_size_bytes else ""
        what = f"the {load.dataset} dataset" if load.dataset else "the largest load"
        text = f"load: {what}, scale {load.scale:,}{size}" if load.scale else f"load: {what}"
        if load.memory_bytes:
            text += f", sized for {human_bytes(load.memory_bytes)} of memory ({load.memory_basis})"
        if load.phases:
            text += " — " + ", ".join(
                f"{name.replace('_', ' ')} {seconds:.1f} s" for name, seconds in load.phases.items()
            )
        notes.append(text)
    if row.read is not None:
        read = row.read
        cold = {True: "cold", False: "NOT cold (partly from memory)", None: "cold unknown"}
        table = f"{human_bytes(read.table_bytes)} table" if read.table_bytes else "table"
        rate = f" at {_f(read.mbps)} MB/s" if read.mbps is not None else ""
        runs = f", mean of {read.runs} runs" if read.runs > 1 else ""
        notes.append(f"large read: {table}{rate}, {cold[read.cold]}{runs}")
    return notes


def regimes_table(rows: list[RegimeRow]) -> Table:
    table = Table(title="working-set regimes: the four numbers per target", title_justify="left")
    table.add_column("target")
    for name in ("in-memory TPS", "on-disk TPS", "load time s", "large read s"):
        table.add_column(name, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(
            row.target,
            _f(row.in_memory_tps),
            _f(row.on_disk_tps),
            _f(row.load.seconds if row.load else None, 2),
            _f(row.read.seconds if row.read else None, 2),
        )
    return table


def regimes_parts(run: RunRecord) -> list[RenderableType]:
    """Nothing unless some target has a large read or TPS in both regimes."""
    rows = regimes_rows(run)
    if not any(r.complete_enough() for r in rows):
        return []
    parts: list[RenderableType] = [regimes_table(rows)]
    for row in rows:
        notes = row_notes(row)
        if notes:
            parts.append(Text(f"  {row.target}:"))
            parts += [Text(f"    {note}") for note in notes]
    return parts
