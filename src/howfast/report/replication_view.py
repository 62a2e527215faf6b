"""The designs side by side (docs/plans/replication.md): one row per target with its standbys,
load time, TPS and p99 by clients, and at the fewest clients what waiting for the standby
cost. The rows are analysis/replication.py's; this module only formats them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import RenderableType
from rich.table import Table as RichTable

from howfast.analysis.replication import DesignRow, design_rows, shows_designs
from howfast.model import JSONValue, RunRecord
from howfast.report.figures import DASH
from howfast.report.tables import Cell, Table

COLUMNS = ("target", "design", "load s", "TPS by clients", "p99 ms by clients",
           "SyncRep share", "sync lag p50 ms", "SyncRep wait ms/tx", "commit split ms",
           "bytes written/tx, all volumes")  # fmt: skip


def _f(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def _by_clients(values: dict[int, float], digits: int) -> str:
    """'1: 313 / 4: 890 / 16: 1,204'"""
    if not values:
        return DASH
    return " / ".join(f"{c}: {v:,.{digits}f}" for c, v in values.items())


def _share(value: float | None) -> str:
    return DASH if value is None else f"{value:.0%}"


def cells(row: DesignRow) -> list[str]:
    return [
        row.target,
        row.design,
        _f(row.load_s),
        _by_clients(row.tps, 0),
        _by_clients(row.p99_ms, 2),
        _share(row.syncrep_share),
        _f(row.sync_lag_p50_ms, 2),
        _f(row.commit_syncrep_wait_ms, 2),
        _split(row.commit_split),
        _f(row.write_bytes_per_tx, 0),
    ]


def _split(parts: Mapping[str, float]) -> str:
    """'0.56 + 0.48 + 1.43' (local flush + hop and standby write + standby flush)."""
    return " + ".join(f"{v:.2f}" for v in parts.values()) if parts else DASH


def _title(rows: list[DesignRow]) -> str:
    mode = next((r.mode for r in rows if r.mode), None)
    return f"designs side by side{f' (pgbench {mode})' if mode else ''}"


def design_table(run: RunRecord) -> Table | None:
    """For the HTML and Markdown report; None when the run has no designs to compare."""
    rows = design_rows(run)
    if not shows_designs(run, rows):
        return None
    table = Table(f"designs-{run.id}", _title(rows), list(COLUMNS))
    for row in rows:
        table.rows.append([Cell(text, numeric=i >= 2) for i, text in enumerate(cells(row))])
    table.notes.append(
        "SyncRep share, sync lag, SyncRep wait, commit split and bytes written at the fewest "
        "clients: the share of active time waiting for a synchronous standby, the lag of the "
        "level's wait, that wait per transaction, a commit's time as local flush + hop and "
        "standby write + standby flush (+ replay), an estimate from once-a-second lags, and "
        "what the primary and its standbys wrote themselves per transaction "
        "(docs/replication.md)"
    )
    return table


def design_parts(run: RunRecord) -> list[RenderableType]:
    """For the terminal; [] when the run has no designs to compare."""
    rows = design_rows(run)
    if not shows_designs(run, rows):
        return []
    table = RichTable(title=_title(rows), title_justify="left")
    for i, name in enumerate(COLUMNS):
        table.add_column(name, justify="right" if i >= 2 else "left")
    for row in rows:
        table.add_row(*cells(row))
    return [table]


def compare_parts(designs: Sequence[Mapping[str, JSONValue]]) -> list[RenderableType]:
    """`compare`: the designs of every run compared, one row each (`Comparison.designs`)."""
    if not designs:
        return []
    table = RichTable(title="designs side by side", title_justify="left")
    for i, name in enumerate(("run", *COLUMNS)):
        table.add_column(name, justify="right" if i >= 3 or i == 0 else "left")
    for doc in designs:
        row = DesignRow(
            target=str(doc.get("target")),
            design=str(doc.get("design")),
            standbys=_int(doc.get("standbys")),
            load_s=_opt(doc.get("load_s")),
            mode=str(doc.get("mode")) if doc.get("mode") else None,
            tps=_by_client_doc(doc.get("tps")),
            p99_ms=_by_client_doc(doc.get("latency_p99_ms")),
            syncrep_share=_opt(doc.get("wait_syncrep_share")),
            sync_lag_p50_ms=_opt(doc.get("sync_lag_p50_ms")),
            commit_syncrep_wait_ms=_opt(doc.get("commit_syncrep_wait_ms")),
            write_bytes_per_tx=_opt(doc.get("design_write_bytes_per_tx")),
            commit_split=_parts(doc.get("commit_split_ms")),
        )
        table.add_row(str(doc.get("run")), *cells(row))
    return [table]


def _opt(value: JSONValue) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _int(value: JSONValue) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _parts(value: JSONValue) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, int | float)}


def _by_client_doc(value: JSONValue) -> dict[int, float]:
    if not isinstance(value, dict):
        return {}
    return {int(k): float(v) for k, v in value.items() if isinstance(v, int | float)}
