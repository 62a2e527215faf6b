"""Pure parts of the Prometheus integration: metric names and labels, the families fed by
runner events, the textfile rendering, PromQL building, and parsing of recorded API answers
(tests/data/prometheus/, from Prometheus 2.42 scraping node_exporter 1.5)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from howfast.machine.devices import RoleDevice
from howfast.metrics.families import RunMetrics, metric_name, step_labels
from howfast.metrics.live import MetricsObserver
from howfast.metrics.textfile import render_run
from howfast.model import RunRecord, Sample, StepRecord
from howfast.observer import StepRef
from howfast.runner.fanout import FanOut
from howfast.samplers.base import SamplerContext
from howfast.samplers.promapi import (
    PromClient,
    PromError,
    PromSeries,
    disk_rate_query,
    disk_selector,
    increase,
    parse_response,
    pg_rate_query,
    string_literal,
    value_at,
    window_increase,
)
from howfast.samplers.prometheus import PrometheusSampler, choose_instance, instance_host

DATA = Path(__file__).resolve().parents[1] / "data" / "prometheus"


def _record(**kw) -> StepRecord:
    base = {
        "target": "/mnt/a",
        "workload": "pgbench",
        "params": {"mode": "tpcb-like", "clients": 4, "duration_s": 10},
        "status": "completed",
        "started_at": "2026-11-22T10:30:00.000+00:00",
        "finished_at": "2026-11-22T10:30:10.500+00:00",
        "metrics": {
            "tps": 1234.5,
            "latency_avg_ms": 3.2,
            "latency_p99_ms": 9.5,
            "transactions": 12345,
            "failed": 0,
            "io_data_write_iops": 800.0,
            "io_data_write_mbps": 12.5,
            "io_data_write_bytes": 125000000,
            "cpu_user_pct": 40.0,
            "checkpoints": 1,
        },
        "series": {
            "tps": [Sample(1.0, 1200.0), Sample(2.0, 0.0), Sample(3.0, 1300.0)],
            "latency_ms": [Sample(1.0, 3.0), Sample(2.0, 0.0), Sample(3.0, 3.5)],
        },
        "sections": {
            "io": {"roles": {"data": {"device": "nvme0n1"}, "wal": {"same_device_as": "data"}}},
            "postgres": {"checkpoints": [{"start_t": 2.0, "end_t": 6.5}]},
        },
    }
    base.update(kw)
    return StepRecord(**base)


# --- names and labels ------------------------------------------------------------------------


def test_metric_names_follow_prometheus_conventions():
    assert metric_name("step", "disk", "bytes") == "howfast_step_disk_bytes"
    assert metric_name("a-b.c") == "howfast_a_b_c"
    families = list(RunMetrics().registry.collect())
    names = [f.name for f in families]
    assert all(re.fullmatch(r"howfast_[a-z0-9_]+", n) for n in names)
    for family in families:  # base units; no percentages or milliseconds
        assert not re.search(r"(_ms|_pct|_percent|_mbps)$", family.name)
    text = generate_latest(RunMetrics().registry).decode()
    counters = re.findall(r"# TYPE (\S+) counter", text)
    assert counters and all(c.endswith("_total") for c in counters)
    assert "_created" not in text


def test_step_labels():
    labels = step_labels(3, "quick", "/mnt/a", "fio", {"profile": "wal-fsync"}, 0)
    assert labels.values() == ("3", "quick", "/mnt/a", "fio", "wal-fsync", "", "", "1")
    pg = step_labels(3, "quick", "/mnt/a", "pgbench", {"mode": "select-only", "clients": 8}, 4)
    assert (pg.mode, pg.clients, pg.step, pg.klass) == ("select-only", "8", "5", "")


# --- live observer -----------------------------------------------------------------------


def _samples(metrics: RunMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in metrics.registry.collect():
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_observer_counts_progress_then_tops_up_to_the_exact_total():
    observer = MetricsObserver("quick")
    ref = StepRef(0, 1, "/mnt/a", "pgbench", "pgbench", {"mode": "tpcb-like", "clients": 4})
    observer.run_started(7, 1, 1)
    observer.step_started(ref, 10.0)
    observer.step_progress(ref, 1.0, {"tps": 1200.0, "latency_ms": 3.0})
    observer.step_progress(ref, 2.0, {"tps": 1300.0, "latency_ms": 3.5, "failed": 2.0})
    live = _samples(observer.metrics)
    assert live["howfast_tps"][0][1] == 1300.0
    assert live["howfast_transactions_total"][0][1] == 2500.0
    assert live["howfast_failed_transactions_total"][0][1] == 2.0
    assert live["howfast_latency_seconds_count"][0][1] == 2
    assert live["howfast_latency_seconds_sum"][0][1] == pytest.approx(0.0065)
    observer.step_finished(ref, _record(metrics={"transactions": 12345, "failed": 3}))
    done = _samples(observer.metrics)
    assert "howfast_tps" not in done  # the per-second gauge ends with the step
    assert done["howfast_transactions_total"][0][1] == 12345
    assert done["howfast_failed_transactions_total"][0][1] == 3
    assert done["howfast_run_progress_ratio"][0][1] == 1.0
    states = {labels["state"]: v for labels, v in done["howfast_step_state"]}
    assert states == {"running": 0, "completed": 1, "failed": 0, "skipped": 0}
    observer.close()
    assert _samples(observer.metrics)["howfast_run_end_time_seconds"][0][1] > 0


def test_fan_out_switches_off_a_failing_observer():
    class Broken:
        def __getattr__(self, name):
            def fail(*args):
                raise RuntimeError("boom")

            return fail

    messages: list[str] = []

    class First:
        def run_started(self, *a):
            pass

        def message(self, text):
            messages.append(text)

    fan = FanOut(First(), Broken(), names=["the live metrics exporter"])  # type: ignore[arg-type]
    fan.run_started(1, 1, 1)
    fan.run_started(1, 1, 1)
    assert len(messages) == 1 and "boom" in messages[0]
    # named in words, never by its class (issue 35)
    assert messages[0].startswith("warning: the live metrics exporter failed and is switched off")


# --- textfile ----------------------------------------------------------------------------


def _run() -> RunRecord:
    return RunRecord(
        id=12,
        plan="quick",
        status="completed",
        started_at="2026-11-22T10:29:00.000+00:00",
        finished_at="2026-11-22T10:31:00.000+00:00",
        environment={},
        targets=[],
        steps=[
            _record(workload="pgbench-init", params={"scale": 10}, metrics={}, series={}),
            _record(),
        ],
    )


def test_textfile_has_no_timestamps_and_parses_back():
    text = render_run(_run())
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        value_part = line.rsplit("}", 1)[-1].split()
        assert len(value_part) == 1, f"a time stamp in {line!r}"  # value only
    families = {f.name: f for f in text_string_to_metric_families(text)}
    tps = families["howfast_step_tps"].samples[0]
    assert tps.value == 1234.5 and tps.timestamp is None
    assert tps.labels == {
        "run_id": "12",
        "plan": "quick",
        "target": "/mnt/a",
        "workload": "pgbench",
        "mode": "tpcb-like",
        "clients": "4",
        "class": "",
        "step": "2",
    }
    tx = families["howfast_transactions"].samples[0]
    assert tx.name == "howfast_transactions_total" and tx.value == 12345
    latency = {s.name: s.value for s in families["howfast_latency_seconds"].samples}
    assert latency["howfast_latency_seconds_count"] == 2  # the second without transactions
    p99 = [s for s in families["howfast_step_latency_seconds"].samples]
    assert p99[0].labels["quantile"] == "0.99" and p99[0].value == pytest.approx(0.0095)
    disk = families["howfast_step_disk_bytes_per_second"].samples[0]
    assert (disk.labels["role"], disk.labels["op"], disk.value) == ("data", "write", 12.5e6)
    assert families["howfast_step_cpu_ratio"].samples[0].value == pytest.approx(0.4)
    device = families["howfast_role_device_info"].samples
    assert [(s.labels["role"], s.labels["device"]) for s in device] == [("data", "nvme0n1")]
    start = families["howfast_checkpoint_start_time_seconds"].samples[0].value
    end = families["howfast_checkpoint_end_time_seconds"].samples[0].value
    assert end - start == pytest.approx(4.5)
    assert families["howfast_run_end_time_seconds"].samples[0].value > 0
    assert "howfast_tps{" not in text  # the per-second gauge is live-only


# --- PromQL ------------------------------------------------------------------------------


def test_promql_building():
    assert string_literal('a"b\\c') == '"a\\"b\\\\c"'
    selector = disk_selector(["vdb", "nvme0n1", "dm-0"])
    assert selector == (
        '{__name__=~"node_disk_read_bytes_total|node_disk_reads_completed_total|'
        'node_disk_writes_completed_total|node_disk_written_bytes_total",'
        'device=~"dm\\\\-0|nvme0n1|vdb"}'
    )
    assert disk_rate_query("written_bytes", ["sda"]) == (
        'irate(node_disk_written_bytes_total{device=~"sda"}[2m])'
    )
    assert pg_rate_query("xact_commit") == (
        'sum by (instance) (irate({__name__=~"pg_stat_database_xact_commit(_total)?"}[2m]))'
    )


# --- responses and counters --------------------------------------------------------------


def test_parse_recorded_responses():
    raw = parse_response((DATA / "query_raw_disk.json").read_text())
    assert sorted(s.name for s in raw) == [
        "node_disk_read_bytes_total",
        "node_disk_reads_completed_total",
        "node_disk_writes_completed_total",
        "node_disk_written_bytes_total",
    ]
    written = next(s for s in raw if s.name == "node_disk_written_bytes_total")
    assert written.labels["device"] == "vda" and len(written.points) >= 5
    assert all(b[0] > a[0] for a, b in zip(written.points, written.points[1:], strict=False))
    rates = parse_response((DATA / "query_range_disk_irate.json").read_text())
    assert len(rates) == 1 and "__name__" not in rates[0].labels  # irate drops the name
    cpu = parse_response((DATA / "query_range_cpu.json").read_text())
    assert {s.labels["mode"] for s in cpu} >= {"user", "system", "idle", "iowait"}
    assert parse_response((DATA / "query_range_pg_empty.json").read_text()) == []
    with pytest.raises(PromError, match="bad_data: invalid parameter"):
        parse_response((DATA / "query_bad.json").read_text())


def test_counter_window_is_interpolated_at_both_ends():
    points = ((10.0, 100.0), (11.0, 200.0), (12.0, 400.0), (13.0, 50.0), (14.0, 150.0))
    assert value_at(points, 10.5) == 150.0
    assert value_at(points, 9.0) is None
    assert increase(400.0, 50.0) == 50.0  # a reset counts from zero
    # 10.5 -> 11: 50, 11 -> 12: 200, reset to 50 at 13: 50, 13 -> 13.5: 50
    assert window_increase(points, 10.5, 13.5) == 350.0
    assert window_increase(points[:1], 10.0, 10.0) is None
    raw = parse_response((DATA / "query_raw_disk.json").read_text())
    written = next(s for s in raw if s.name == "node_disk_written_bytes_total")
    first, last = written.points[0], written.points[-1]
    assert window_increase(written.points, first[0], last[0]) == last[1] - first[1]


def test_instance_choice():
    assert instance_host("10.0.0.5:9100") == "10.0.0.5"
    assert instance_host("[::1]:9100") == "::1"
    assert choose_instance(set()) == (None, "")
    assert choose_instance({"a:1"}) == ("a:1", "")
    chosen, note = choose_instance({"node7:9100", "127.0.0.1:9100"})
    assert chosen == "127.0.0.1:9100" and "2 instances answered" in note
    assert choose_instance({"x:1", "y:1"}, prefer="y:1") == ("y:1", "")


class RecordedClient(PromClient):
    """Answers the sampler's queries from the recorded files."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9")
        self.queries: list[str] = []

    def _get(self, path: str, params: dict[str, str]) -> list[PromSeries]:
        query = params["query"]
        self.queries.append(query)
        if query.startswith("min(timestamp("):
            return [PromSeries({}, ((0.0, math.inf),))]
        if path == "/api/v1/query":
            return parse_response((DATA / "query_raw_disk.json").read_text())
        if "node_disk_written_bytes_total" in query:
            return parse_response((DATA / "query_range_disk_irate.json").read_text())
        if "node_cpu_seconds_total" in query:
            return parse_response((DATA / "query_range_cpu.json").read_text())
        return []


def test_sampler_on_recorded_answers(monkeypatch: pytest.MonkeyPatch):
    raw = json.loads((DATA / "query_raw_disk.json").read_text())["data"]["result"][0]["values"]
    start, end = float(raw[0][0]) + 0.5, float(raw[-1][0]) - 0.5
    client = RecordedClient()
    sampler = PrometheusSampler(
        client, [RoleDevice("data", "/d", "vda"), RoleDevice("wal", "/w", "vda", "data")], wait_s=0
    )
    ctx = SamplerContext(target=None, connection=None, interval_s=1.0)  # type: ignore[arg-type]
    ctx.started_wall = start
    ctx.stopping_at = end - start
    sampler.start(ctx)
    result = sampler.stop()
    m = result.metrics
    assert m["prom_data_write_bytes"] > 0 and m["prom_data_write_iops"] > 0
    assert m["prom_data_write_mbps"] == pytest.approx(
        m["prom_data_write_bytes"] / 1e6 / (end - start)
    )
    assert "prom.data.write_mbps" in result.series and "prom.cpu.user_pct" in result.series
    assert all(p.t > 0 for p in result.series["prom.data.write_mbps"])
    assert not any(k.startswith("prom_wal") for k in m)  # wal shares the data device
    section = result.sections["io"]["prometheus"]
    assert any(f.startswith("node_disk_written_bytes_total{") for f in section["found"])
    assert any("pg_stat_database_xact_commit" in x for x in section["missing"])
    assert any("could not match" in w for w in result.warnings)
    # the disk series were asked for the data device only, by the exact regex
    assert any('device=~"vda"' in q for q in client.queries)
