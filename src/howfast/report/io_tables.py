"""Terminal tables of what the samplers saw in each step: I/O per device role, then
checkpoints, cache and CPU. They format the step's stored metrics and sections, nothing else.

    from howfast.report import io_tables
    Group(..., *io_tables.io_parts(run))    # [] when no step was sampled
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from howfast.model import RunRecord, StepRecord
from howfast.plugin.registry import find


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _fmt(value: object, digits: int = 1, thousands: bool = False) -> str:
    number = _num(value)
    if number is None:
        return "–"
    return f"{number:,.{digits}f}" if thousands else f"{number:.{digits}f}"


def step_label(step: StepRecord) -> str:
    """'pgbench tpcb-like 8c checkpoint_completion_target=0.5 #2', 'fio wal-fsync': the
    workload's compact label (plugin/workload.py), its settings and repetition."""
    p = step.all_params
    plugin = find(step.workload)
    text = plugin.compact_label(p) if plugin is not None else step.workload
    settings = p.get("settings")
    if isinstance(settings, dict) and settings:
        text += " " + " ".join(f"{k}={v}" for k, v in settings.items())
    repetition = p.get("repetition")
    if isinstance(repetition, int) and repetition > 1:
        text += f" #{repetition}"
    return text


def _roles(step: StepRecord) -> list[tuple[str, dict[str, Any]]]:
    """(role label, role section) of the sampled roles; a device serving several roles is
    one row, labelled with all of them ('data+wal')."""
    io = step.sections.get("io") or {}
    roles = io.get("roles") if isinstance(io, dict) else None
    if not isinstance(roles, dict):
        return []
    sharing: dict[str, list[str]] = {}
    for name, info in roles.items():
        if isinstance(info, dict) and isinstance(info.get("same_device_as"), str):
            sharing.setdefault(info["same_device_as"], []).append(name)
    rows = []
    for name, info in roles.items():
        if isinstance(info, dict) and isinstance(info.get("summary"), dict):
            rows.append(("+".join([name, *sharing.get(name, [])]), info))
    return rows


def io_table(steps: list[StepRecord]) -> Table | None:
    table = Table(title="I/O per device role (whole step)", title_justify="left")
    table.add_column("step")
    table.add_column("role (device)")
    for name in (
        "write MB/s",
        "write IOPS",
        "avg write KiB",
        "write wait ms",
        "read MB/s",
        "queue",
        "util %",
        "write peak/mean",
        "pattern",
    ):
        table.add_column(name, justify="left" if name == "pattern" else "right")
    for step in steps:
        for i, (label, info) in enumerate(_roles(step)):
            s = info["summary"]
            table.add_row(
                step_label(step) if i == 0 else "",
                f"{label} ({info.get('device')})",
                _fmt(s.get("write_mbps"), 2, thousands=True),
                _fmt(s.get("write_iops"), 0, thousands=True),
                _fmt(s.get("avg_write_kib"), 1),
                _fmt(s.get("write_await_ms"), 3),
                _fmt(s.get("read_mbps"), 2, thousands=True),
                _fmt(s.get("queue_depth"), 2),
                _fmt(s.get("util_pct"), 0),
                _fmt(s.get("write_peak_to_mean"), 2),
                str(s.get("write_pattern") or "–"),
            )
    return table if table.row_count else None


def checkpoint_table(steps: list[StepRecord]) -> Table | None:
    table = Table(title="checkpoints, cache and CPU", title_justify="left")
    table.add_column("step")
    for name in (
        "checkpoints",
        "TPS in / out of ckpt",
        "WAL MB",
        "write ampl.",
        "cache hit %",
        "CPU usr/sys/iowait %",
        "pgbench CPU %",
    ):
        table.add_column(name, justify="right")
    for step in steps:
        m = step.metrics
        if not step.sections:
            continue
        during, outside = m.get("tps_during_checkpoints"), m.get("tps_outside_checkpoints")
        tps = "–" if during is None and outside is None else f"{_fmt(during)} / {_fmt(outside)}"
        wal = _num(m.get("wal_bytes"))
        hit = _num(m.get("cache_hit_ratio"))
        cpu = "/".join(_fmt(m.get(f"cpu_{k}_pct"), 0) for k in ("user", "system", "iowait"))
        table.add_row(
            step_label(step),
            _fmt(m.get("checkpoints"), 0),
            tps,
            _fmt(wal / 1e6 if wal is not None else None, 1, thousands=True),
            _fmt(m.get("io_write_amplification"), 2),
            _fmt(hit * 100 if hit is not None else None, 2),
            cpu,
            _fmt(m.get("pgbench_cpu_pct"), 0),
        )
    return table if table.row_count else None


def io_parts(run: RunRecord) -> list[RenderableType]:
    """Per target, the two tables for the steps that were sampled; [] when none was."""
    parts: list[RenderableType] = []
    for target in run.targets:
        steps = [s for s in run.steps if s.target == target.name and s.sections]
        tables = [t for t in (io_table(steps), checkpoint_table(steps)) if t is not None]
        if tables:
            parts.append(Text(f"{target.name} — what the samplers saw", style="bold"))
            parts += tables
    return parts
