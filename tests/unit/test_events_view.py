"""The events table, verdict lines and chart marks (report/events_view.py), on the recorded
restart and crash of tests/data/pgbench/survive-pg15 stored as a step would be."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console

from howfast.analysis import events
from howfast.analysis.loadrecord import HistoryCount
from howfast.event_marks import marks_section
from howfast.model import RunRecord, StepRecord
from howfast.report import events_view
from tests.unit.test_event_figures import recorded_marks, rows_between
from tests.unit.test_stitch import stitched


def event_step() -> StepRecord:
    record, _, timeline = stitched()
    marks = recorded_marks()
    windows = events.commit_windows(marks, record)
    counts = tuple(HistoryCount(lo, hi, rows_between(lo, hi)) for lo, hi in windows)
    record = dataclasses.replace(record, history=counts)
    named = events.windows(marks, record)
    return StepRecord(
        target="/data/a",
        workload="pgbench",
        params={"mode": "tpcb-like", "clients": 2, "events": [m.text for m in marks]},
        status="completed",
        started_at="2026-11-25T21:00:00Z",
        finished_at="2026-11-25T21:00:20Z",
        histograms={f"latency_us:{k}": timeline.histogram(*w) for k, w in named.items()},
        sections={"load": record.document(), "events": marks_section(marks)},
    )


def run_of(*steps: StepRecord) -> RunRecord:
    return RunRecord(1, "quick", "completed", "t0", "t1", {}, [], list(steps))


def test_the_table_has_a_row_per_event_with_its_figures_and_a_verdict_line_each():
    step = event_step()
    quiet = dataclasses.replace(step, sections={}, histograms={}, params={"clients": 2})
    table = events_view.events_table([run_of(quiet, step)])
    assert table.columns[:3] == ["target", "step", "event"]
    assert [r[2].text for r in table.rows] == ["4.5s:restart", "9.5s:crash"]
    restart = [c.text for c in table.rows[0]]
    assert restart[1] == "tpcb-like, 2 clients" and restart[3] == "4.5 s"
    assert restart[4].endswith(" s") and float(restart[4].split()[0]) > 0
    assert restart[9] == "0" and restart[8] == "2"
    assert "→" in restart[6]
    out = Console(width=200, record=True)
    for part in events_view.events_parts(run_of(step)):
        out.print(part)
    text = out.export_text()
    assert "Events" in text and "9.5s:crash" in text
    assert "/data/a, tpcb-like, 2 clients: restart at 4.5 s: " in text
    assert "0 commits lost" in text


def test_a_run_without_events_has_no_table_and_no_lines():
    step = dataclasses.replace(event_step(), sections={})
    assert events_view.events_parts(run_of(step)) == []
    assert events_view.events_table([run_of(step)]).rows == []


def test_charts_mark_each_event_and_shade_each_outage():
    markers, spans = events_view.chart_marks(event_step())
    assert [m.label for m in markers] == ["4.5s:restart", "9.5s:crash"]
    assert [s.kind for s in spans] == ["downtime", "downtime"]
    for marker, span in zip(markers, spans, strict=True):
        assert span.x0 < span.x1 and span.x0 <= marker.x + 1 and span.x1 >= marker.x


def test_a_step_read_without_its_histograms_shows_the_stored_window_p99s():
    from howfast.analysis.events import window_p99_ms

    step = event_step()
    stored = window_p99_ms(step.histograms)
    assert stored and all(isinstance(v, float) for v in stored.values())
    events_section = {**step.sections["events"], "window_p99_ms": stored}
    bare = dataclasses.replace(
        step, histograms={}, sections={**step.sections, "events": events_section}
    )
    with_h = events.step_figures(step.sections, step.histograms)
    without = events.step_figures(bare.sections, bare.histograms)
    assert [f.p99_before_ms for f in without] == [f.p99_before_ms for f in with_h]
    assert without[0].p99_before_ms is not None


def test_the_per_second_chart_draws_each_event_as_a_line_and_its_outage_as_long_as_it_was(
    tmp_path: Path,
):
    from howfast.report.charts import Chart, event_spans
    from howfast.report.charts_plotly import figure
    from howfast.report.charts_png import render_png

    spans = event_spans(event_step())
    assert [s.kind for s in spans] == ["event", "event", "downtime", "downtime"]
    chart = Chart("c1", "per second", "time (s)", "TPS", spans=spans)
    shapes = figure(chart)["layout"]["shapes"]
    lines = [s for s in shapes if s["line"].get("dash") == "dash"]
    applied = [m.applied_s for m in recorded_marks()]
    assert [s["x0"] for s in lines] == [s["x1"] for s in lines]
    assert [s["x0"] for s in lines] == [round(a, 3) for a in applied if a is not None]
    outages = [s for s in shapes if s["fillcolor"].startswith("rgba(204")]
    assert [round(s["x1"] - s["x0"], 3) for s in outages] == [
        round(s.end - s.start, 3) for s in spans if s.kind == "downtime"
    ]
    labels = [a["text"] for a in figure(chart)["layout"]["annotations"]]
    assert labels == ["4.5s:restart", "9.5s:crash"]
    render_png(chart, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0


def test_prometheus_has_each_events_figures_and_no_event_families_without_events():
    from prometheus_client import generate_latest

    from howfast.metrics.families import RunMetrics, step_labels

    step = event_step()
    metrics = RunMetrics()
    quiet = dataclasses.replace(step, sections={}, histograms={})
    metrics.step_finished(step_labels(1, "quick", step.target, "pgbench", quiet.params, 0), quiet)
    assert b"howfast_step_event" not in generate_latest(metrics.registry)
    metrics.step_finished(step_labels(1, "quick", step.target, "pgbench", step.params, 1), step)
    text = generate_latest(metrics.registry).decode()
    assert 'howfast_events_total{action="restart"' in text and 'outcome="applied"' in text
    lines = [line for line in text.splitlines() if line.startswith("howfast_step_event_lost")]
    assert len(lines) == 2 and all(line.endswith(" 0.0") for line in lines)
    assert 'at="4.5s"' in text and "howfast_step_event_downtime_seconds{" in text


def test_a_step_on_a_rebuilt_design_says_on_which_server_it_ran_and_how_long_the_rebuild_took():
    from howfast.report.events_view import rebuilt_line

    restored = {"primary": "standby_1", "standby": "standby_1", "seconds": 2.265,
                "standby_sync_state": "sync"}  # fmt: skip
    step = StepRecord(
        target="/data/a",
        workload="pgbench",
        params={"mode": "tpcb-like", "clients": 1},
        status="completed",
        started_at="2026-11-25T21:00:30Z",
        finished_at="2026-11-25T21:00:40Z",
        resolved={"design_restored": restored},
    )
    assert rebuilt_line(step) == (
        "/data/a, tpcb-like, 1 clients: ran on standby_1, promoted by a failover; the design "
        "rebuilt before it in 2.27 s (standby_1 made again by base backup, sync)"
    )
    assert rebuilt_line(dataclasses.replace(step, resolved={})) is None
