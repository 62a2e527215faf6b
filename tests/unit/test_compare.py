"""`howfast compare` on runs stored with the Store API in a temporary SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from scipy import stats as reference

from howfast.analysis.compare import CANNOT_JUDGE, compare_runs
from howfast.analysis.groups import group_steps
from howfast.cli.app import cli
from howfast.model import RunRecord
from howfast.store import SqlStore
from tests.unit.stored_runs import ENVIRONMENT, init, open_temp_store, pgbench, store_run

FAST = [1100.0, 1095.0, 1110.0]
SLOW = [1000.0, 1010.0, 990.0]
NOISY_A = [1000.0, 1050.0, 950.0]
NOISY_B = [1010.0, 960.0, 1060.0]


@pytest.fixture
def db(tmp_path: Path):
    store = open_temp_store(tmp_path)
    yield store
    store.close()


def repeated(target: str, values: list[float], clients: int = 4) -> list:
    return [pgbench(target, v, clients, repetition=i) for i, v in enumerate(values, start=1)]


def two_runs(db: SqlStore) -> tuple[RunRecord, RunRecord]:
    """Run A and run B on different directories: at 4 clients B is faster beyond doubt, at 8
    clients the two differ by noise only; the load ran once in each."""
    steps_a = [init("/mnt/a", 10.0), *repeated("/mnt/a", SLOW), *repeated("/mnt/a", NOISY_A, 8)]
    steps_b = [init("/mnt/b", 12.0), *repeated("/mnt/b", FAST), *repeated("/mnt/b", NOISY_B, 8)]
    a = store_run(db, steps_a, targets=["/mnt/a"])
    b = store_run(db, steps_b, targets=["/mnt/b"])
    run_a, run_b = db.get_run(a, with_series=True), db.get_run(b, with_series=True)
    assert run_a is not None and run_b is not None
    return run_a, run_b


def test_repetitions_are_gathered_and_warmups_left_out(db: SqlStore) -> None:
    steps = [pgbench("/mnt/a", 500.0, warmup=True), *repeated("/mnt/a", SLOW)]
    run = db.get_run(store_run(db, steps))
    assert run is not None
    groups = group_steps(run)
    assert len(groups) == 1
    assert groups[0].n == 3
    assert groups[0].stats["tps"].mean == pytest.approx(1000.0)


def test_matched_by_target_position_workload_and_params(db: SqlStore) -> None:
    comparison = compare_runs(two_runs(db))
    labels = [t.label for t in comparison.tests]
    assert labels == [
        "pgbench-init scale 10",
        "pgbench tpcb-like, 4 clients",
        "pgbench tpcb-like, 8 clients",
    ]
    assert [g.target if g else None for g in comparison.tests[1].groups] == ["/mnt/a", "/mnt/b"]
    assert comparison.unmatched == []


def test_a_significant_difference(db: SqlStore) -> None:
    test = compare_runs(two_runs(db)).tests[1]
    tps = next(m for m in test.metrics if m.metric == "tps")
    base, other = tps.values
    assert base is not None and other is not None
    assert (base.mean, other.mean) == (pytest.approx(1000.0), pytest.approx(1101.6667, rel=1e-6))
    difference = tps.differences[1]
    assert difference is not None
    assert difference.ratio == pytest.approx(1101.6667 / 1000.0, rel=1e-6)
    expected = reference.ttest_ind(SLOW, FAST, equal_var=False).pvalue
    assert difference.p_value == pytest.approx(float(expected))
    assert difference.significant is True
    assert difference.verdict == "better"  # more TPS
    latency = next(m for m in test.metrics if m.metric == "latency_avg_ms")
    assert latency.differences[1] is not None
    assert latency.differences[1].verdict == "better"  # less latency
    assert test.warnings == ()  # three repetitions on each side


def test_a_difference_that_is_not_significant(db: SqlStore) -> None:
    test = compare_runs(two_runs(db)).tests[2]
    difference = next(m for m in test.metrics if m.metric == "tps").differences[1]
    assert difference is not None
    assert difference.significant is False
    assert difference.p_value is not None and difference.p_value > 0.5
    assert difference.verdict == "no significant difference"


def test_one_repetition_cannot_be_judged(db: SqlStore) -> None:
    comparison = compare_runs(two_runs(db))
    load = comparison.tests[0]
    difference = load.metrics[0].differences[1]
    assert difference is not None
    assert difference.ratio == pytest.approx(1.2)
    assert difference.significant is None
    assert difference.verdict == f"{CANNOT_JUDGE} (1 repetition)"
    assert any("fewer than 3 repetitions" in w for w in load.warnings)
    assert any("fewer than 3 repetitions" in w for w in comparison.warnings)


def test_environment_differences_that_matter(db: SqlStore) -> None:
    a = store_run(db, repeated("/mnt/a", SLOW))
    b = store_run(
        db,
        repeated("/mnt/b", FAST),
        targets=["/mnt/b"],
        environment={**ENVIRONMENT, "kernel": "6.12.0", "hostname": "bench2"},
        settings={"shared_buffers": "4GB", "synchronous_commit": "on", "port": "5433"},
    )
    runs = [db.get_run(a), db.get_run(b)]
    assert None not in runs
    comparison = compare_runs(runs)  # type: ignore[arg-type]
    found = {d.field: d for d in comparison.environment}
    assert found["kernel"].matters and found["kernel"].values == ("6.1.0-26-amd64", "6.12.0")
    assert not found["host"].matters
    assert found["setting shared_buffers"].matters
    assert "setting port" not in found  # every created cluster gets its own
    assert any(w.startswith("machine kernel differs") for w in comparison.warnings)


def test_steps_in_one_run_only_are_listed(db: SqlStore) -> None:
    a = store_run(db, repeated("/mnt/a", SLOW))
    b = store_run(db, [*repeated("/mnt/a", FAST), pgbench("/mnt/a", 900.0, clients=16)])
    comparison = compare_runs([db.get_run(a), db.get_run(b)])  # type: ignore[list-item]
    assert comparison.unmatched == [(b, "/mnt/a: pgbench tpcb-like, 16 clients")]


def test_cli_compare_json_and_terminal(db: SqlStore, tmp_path: Path) -> None:
    run_a, run_b = two_runs(db)
    store = str(tmp_path / "results.db")
    runner = CliRunner()
    result = runner.invoke(
        cli, ["compare", str(run_a.id), str(run_b.id), "--store", store, "--json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["baseline"] == str(run_a.id)
    assert [t["repetitions"] for t in document["tests"]] == [[1, 1], [3, 3], [3, 3]]
    tps = document["tests"][1]["metrics"][0]
    assert tps["metric"] == "tps" and tps["unit"] == "tx/s"
    assert tps["values"][0]["mean"] == pytest.approx(1000.0)
    assert tps["values"][0]["n"] == 3
    assert tps["differences"][0] is None
    assert tps["differences"][1]["significant"] is True

    result = runner.invoke(cli, ["compare", str(run_a.id), str(run_b.id), "--store", store])
    assert result.exit_code == 0, result.output
    assert "1,000.0 ± 24.8 (3)" in result.stdout  # 10 × t(0.975, 2) / √3 = 24.8
    assert "better" in result.stdout and "not significant" in result.stdout

    result = runner.invoke(cli, ["compare", str(run_a.id), "99", "--store", store])
    assert result.exit_code != 0


def test_mount_options_that_skip_flushes_matter() -> None:
    from howfast.analysis.envdiff import target_differences
    from howfast.model import TargetRecord

    def target(options: str, disk: str) -> TargetRecord:
        device = {"data": {"fstype": "ext4", "mount_options": options, "device": {"disk": disk}}}
        return TargetRecord("/mnt/x", "local", "16.4", {}, device)

    found = {d.field: d for d in target_differences(0, [target("rw", "sda"), target("rw", "sdb")])}
    assert not found["data device"].matters  # a different disk is what is being compared
    found = {
        d.field: d
        for d in target_differences(0, [target("rw", "sda"), target("rw,nobarrier", "sda")])
    }
    assert found["data mount options"].matters


def test_the_json_says_what_limited_each_test_in_each_run(db: SqlStore) -> None:
    """Verdicts are derived on read: a compared test carries the verdict most of its
    repetitions got, per run."""
    from dataclasses import replace

    run_a, run_b = two_runs(db)

    def with_verdict(run: RunRecord, verdict: str) -> RunRecord:
        steps = [
            replace(s, sections={**s.sections, "why": {"verdict": verdict}})
            if s.workload == "pgbench" else s
            for s in run.steps
        ]  # fmt: skip
        return replace(run, steps=steps)

    doc = compare_runs([with_verdict(run_a, "storage latency"), with_verdict(run_b, "server CPU")])
    tests = doc.document()["tests"]
    assert [t["why"] for t in tests if t["workload"] == "pgbench"] == [
        ["storage latency", "server CPU"],
        ["storage latency", "server CPU"],
    ]
    assert [t["why"] for t in tests if t["workload"] == "pgbench-init"] == [[None, None]]
    plain = compare_runs([run_a, run_b]).document()["tests"]
    assert all(t["why"] == [None, None] for t in plain)
