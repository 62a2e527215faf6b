"""The table of `howfast results list`: apart from report/terminal.py, whose run details load
every workload's report part, which listing runs never needs."""

from __future__ import annotations

from rich.table import Table

from howfast.model import RunSummary
from howfast.printable import printable


def run_list(runs: list[RunSummary]) -> Table:
    table = Table(title="howfast runs")
    for name in ("id", "started", "plan", "label", "status", "steps", "targets"):
        table.add_column(name, justify="right" if name in ("id", "steps") else "left")
    for r in runs:
        table.add_row(
            str(r.id),
            r.started_at[:19].replace("T", " "),
            printable(r.plan),
            printable(r.label or ""),
            r.status,
            str(r.step_count),
            printable(", ".join(r.targets)),
        )
    return table
