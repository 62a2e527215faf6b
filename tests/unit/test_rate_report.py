"""The latency-under-load section of reports and the terminal table, on stored rate curves."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from howfast.analysis.overview import overview
from howfast.report.charts import Chart
from howfast.report.output import write_report
from howfast.report.rate_section import rate_blocks
from howfast.report.rate_table import rate_parts
from tests.unit.stored_runs import open_temp_store, pgbench, store_run

# Offered rate -> (achieved TPS, p99 ms, lag ms, met)
CURVE = {100.0: (100.0, 2.0, 0.1, True), 200.0: (199.0, 2.1, 0.2, True),
         300.0: (297.0, 2.2, 0.3, True), 400.0: (330.0, 40.0, 900.0, False)}  # fmt: skip


def _curve_steps(target: str):
    steps = [pgbench(target, 350.0, curve_role="max", slo="p99=10ms")]
    for rate, (tps, p99, lag, met) in CURVE.items():
        step = pgbench(target, tps, rate=rate, slo="p99=10ms")
        step.metrics.update(latency_p99_ms=p99, schedule_lag_avg_ms=lag, rate_met=met,
                            rate_verdict="ok" if met else "achieved 82%",
                            slo_met=met and p99 <= 10)  # fmt: skip
        steps.append(step)
    steps[-1].params["curve_last"] = True
    steps[-1].metrics.update(
        saturation_rate=300.0,
        knee_rate=300.0,
        slo_max_rate=300.0,
        knee_latency_metric="latency_p99_ms",
        knee_how="rises from 400/s",
    )
    return steps


def test_report_section_table_and_chart(tmp_path: Path):
    db = open_temp_store(tmp_path)
    run_id = store_run(db, _curve_steps("/mnt/a") + _curve_steps("/mnt/b"),
                       targets=["/mnt/a", "/mnt/b"])  # fmt: skip
    run = db.get_run(run_id, with_series=True)
    assert run is not None
    blocks = rate_blocks(overview([run]), "pgbench")
    charts = [b for b in blocks if isinstance(b, Chart)]
    assert len(charts) == 1  # one chart per mode and client count, a line per target
    chart = charts[0]
    assert chart.x_title == "offered rate (transactions/s)" and "p99" in chart.y_title
    lines = {t.name: t for t in chart.traces}
    assert lines["/mnt/a"].x == [100.0, 200.0, 300.0, 400.0]
    assert lines["/mnt/a"].y == [2.0, 2.1, 2.2, 40.0]
    assert lines["knee /mnt/a"].x == [300.0] and lines["knee /mnt/a"].y == [2.2]
    assert lines["SLO p99=10ms"].y == [10.0, 10.0]

    out = tmp_path / "r.html"
    write_report([run], out)
    html = out.read_text()
    assert "Latency under load" in html and "saturation point 300.0 tx/s" in html
    assert re.search(r"400\.0</td>\s*<td[^>]*>330\.0", html)  # offered, then achieved
    md = tmp_path / "r.md"
    write_report([run], md)
    text = md.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 400.0 "))
    assert [c.strip() for c in row.strip("|").split("|")][:6] == [
        "400.0", "330.0", "12.121", "40.000", "900.000", "no"
    ]  # fmt: skip
    assert "highest rate meeting p99=10ms: 300.0 tx/s" in text

    console = Console(width=200, record=True)
    for part in rate_parts(run.steps):
        console.print(part)
    screen = console.export_text()
    assert "saturation point: 300.0 tx/s" in screen and "knee: 300.0 tx/s" in screen
    db.close()
