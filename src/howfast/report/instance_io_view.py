"""(issue 37) The WAL and data I/O of every instance of a `cnpg://` target, per step: one
row per instance (analysis/instance_io.py), a table per target, for the terminal (`run`,
`results show`) and the HTML and Markdown report. Formats only."""

from __future__ import annotations

from itertools import groupby

from rich.console import RenderableType
from rich.table import Table as RichTable

from howfast.analysis.instance_io import InstanceIoRow, RoleIo, instance_io_rows
from howfast.model import RunRecord
from howfast.report.figures import DASH
from howfast.report.io_tables import step_label
from howfast.report.tables import Cell, Table

TITLE = "WAL and data I/O of every instance"
COLUMNS = ("step", "instance", "WAL MB written", "WAL MB/s", "data MB written", "data MB/s",
           "data MB read", "WAL volume")  # fmt: skip
NUMERIC = range(2, 7)
NOTE = (
    "Each instance's own reads and writes (its container's cgroup counters) on its WAL "
    "volume's device and its data volume's, over the step; an instance whose pod was made "
    "again within the step is summed over its pods (the outage is a gap). WAL volume 'in "
    "PGDATA' (none of its own) or on the 'data's device': its writes are in the data columns."
)


def _mb(value: int | None) -> str:
    return DASH if value is None else f"{value / 1e6:,.1f}"


def _rate(role: RoleIo | None) -> str:
    rate = role.write_mbps() if role is not None else None
    return DASH if rate is None else f"{rate:,.2f}"


def _instance(row: InstanceIoRow) -> str:
    text = row.instance + (" (primary)" if row.primary else "")
    return text + (f", {row.pods} pods" if row.pods > 1 else "")


def cells(row: InstanceIoRow, label: str) -> list[str]:
    wal, data = row.wal, row.data
    return [
        label,
        _instance(row),
        _mb(wal.write_bytes if wal else None),
        _rate(wal),
        _mb(data.write_bytes if data else None),
        _rate(data),
        _mb(data.read_bytes if data else None),
        row.wal_where,
    ]


def _by_target(run: RunRecord) -> list[tuple[str, list[list[str]]]]:
    labels = {s.id: step_label(s) for s in run.steps}
    rows = instance_io_rows(run)
    return [
        (target, [cells(r, labels.get(r.step_id, str(r.step_id))) for r in group])
        for target, group in groupby(rows, key=lambda r: r.target)
    ]


def instance_io_parts(run: RunRecord) -> list[RenderableType]:
    """For the terminal; [] when no step has instances (not a `cnpg://` run)."""
    parts: list[RenderableType] = []
    for target, rows in _by_target(run):
        table = RichTable(title=f"{target} — {TITLE}", title_justify="left", caption=NOTE,
                          caption_justify="left")  # fmt: skip
        for i, name in enumerate(COLUMNS):
            table.add_column(name, justify="right" if i in NUMERIC else "left")
        for row in rows:
            table.add_row(*row)
        parts.append(table)
    return parts


def instance_io_table(run: RunRecord) -> Table | None:
    """For the HTML and Markdown report; None when no step has instances."""
    by_target = _by_target(run)
    if not by_target:
        return None
    table = Table(f"instance-io-{run.id}", TITLE, ["target", *COLUMNS])
    for target, rows in by_target:
        for row in rows:
            texts = [target, *row]
            table.rows.append([Cell(t, numeric=i - 1 in NUMERIC) for i, t in enumerate(texts)])
    table.notes.append(NOTE)
    return table
