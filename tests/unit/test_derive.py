"""Derive on read: verdicts are computed when a run is read, for runs howfast made, runs
imported and runs stored by an older howfast alike (analysis/derive.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from sqlalchemy import insert, text

from howfast.analysis.derive import derive_run
from howfast.analysis.groups import params_key
from howfast.model import JSONValue, RunRecord, Sample, StepRecord, TargetRecord
from howfast.service.reading import read_run
from howfast.store import MIGRATIONS, open_store
from howfast.store.schema import runs, targets
from tests.unit.stored_runs import STARTED

# Offered rate -> (achieved TPS, p99 ms, schedule lag ms): met up to 300/s, not at 400/s.
CURVE = {100.0: (100.0, 2.0, 0.1), 200.0: (199.5, 2.1, 0.2), 300.0: (299.0, 2.3, 0.3),
         400.0: (330.0, 40.0, 900.0)}  # fmt: skip
SLO = "p99=10ms"


def rate_step(target: str, rate: float | None, tps: float, p99: float, lag: float | None,
              **params: JSONValue) -> StepRecord:  # fmt: skip
    metrics: dict[str, JSONValue] = {"tps": tps, "latency_avg_ms": p99 / 2, "latency_p99_ms": p99}
    if lag is not None:
        metrics["schedule_lag_avg_ms"] = lag
    asked: dict[str, JSONValue] = {"mode": "tpcb-like", "clients": 4, "duration_s": 60, **params}
    if rate is not None:
        asked["rate"] = rate
    return StepRecord(target, "pgbench", asked, "completed", STARTED, STARTED, metrics=metrics)


def curve(target: str, *, planned: bool) -> list[StepRecord]:
    """A rate curve as `howfast run rate-curve` stores it (planned: a full-speed step first,
    the last step marked), or as several fixed-rate outputs imported as steps of one run."""
    extra: dict[str, JSONValue] = {"slo": SLO}
    out = [rate_step(target, None, 350.0, 30.0, None, curve_role="max", **extra)] if planned else []
    for rate, (tps, p99, lag) in CURVE.items():
        out.append(rate_step(target, rate, tps, p99, lag, **extra))
    if planned:
        out[-1].params["curve_last"] = True
    return out


def run_of(steps: list[StepRecord], kind: str = "local") -> RunRecord:
    names = list(dict.fromkeys(s.target for s in steps))
    return RunRecord(1, "x", "completed", STARTED, STARTED, {},
                     [TargetRecord(n, kind) for n in names], steps)  # fmt: skip


VERDICTS = ("rate_offered", "rate_met", "rate_verdict", "slo_met", "slo_value_ms")
SUMMARY = ("curve_rates", "saturation_rate", "knee_rate", "knee_latency_metric", "slo_max_rate")


def test_an_imported_rate_curve_gets_the_verdicts_of_a_run_howfast_made() -> None:
    made = derive_run(run_of(curve("/mnt/a", planned=True)))
    imported = derive_run(run_of(curve("pgbench.log", planned=False), kind="import"))
    made_rated = [s for s in made.steps if "rate" in s.params]
    for ours, theirs in zip(made_rated, imported.steps, strict=True):
        assert {k: ours.metrics.get(k) for k in VERDICTS} == {
            k: theirs.metrics.get(k) for k in VERDICTS
        }
        assert ours.warnings == theirs.warnings
    assert [s.metrics["rate_met"] for s in imported.steps] == [True, True, True, False]
    assert "not met" in imported.steps[-1].warnings[0]
    last = imported.steps[-1].metrics
    assert {k: last[k] for k in SUMMARY} == {k: made.steps[-1].metrics[k] for k in SUMMARY}
    assert last["saturation_rate"] == 300.0 and last["slo_max_rate"] == 300.0
    assert last["curve_rates"] == 4
    assert all("curve_rates" not in s.metrics for s in imported.steps[:-1])


def test_derivation_leaves_the_stored_run_alone_and_one_step_is_no_curve() -> None:
    run = run_of(curve("/mnt/a", planned=True))
    derive_run(run)
    assert all("rate_met" not in s.metrics for s in run.steps)
    single = derive_run(run_of([rate_step("x", 100.0, 100.0, 2.0, 0.1)], kind="import"))
    assert single.steps[0].metrics["rate_met"] is True
    assert "curve_rates" not in single.steps[0].metrics


def test_a_curve_is_the_same_for_the_runner_and_the_analysis() -> None:
    # Other settings make another curve on the same target.
    steps = curve("/mnt/a", planned=True)
    other = [replace(s, params={**s.params, "settings": {"fsync": "off"}}) for s in steps]
    derived = derive_run(run_of(steps + other))
    lasts = [s for s in derived.steps if s.params.get("curve_last")]
    assert [s.metrics["curve_rates"] for s in lasts] == [4, 4]


def test_stored_and_read_back_a_rate_curve_has_its_verdicts(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as db:
        run_id = db.create_run("import", {}, STARTED)
        db.add_target(run_id, TargetRecord("pgbench.log", "import"))
        for step in curve("pgbench.log", planned=False):
            step.series["lag_ms"] = [Sample(1.0, float(step.metrics["schedule_lag_avg_ms"]))]
            db.add_step(run_id, step)
        db.finish_run(run_id, "completed", STARTED)
        run = read_run(db, run_id)
    assert run is not None
    assert [s.metrics["rate_met"] for s in run.steps] == [True, True, True, False]
    assert run.steps[-1].metrics["saturation_rate"] == 300.0
    doc = run.document()
    assert doc["steps"][0]["asked"] == doc["steps"][0]["params"]
    assert doc["steps"][0]["resolved"] == {}


def test_asked_and_resolved_are_kept_apart_and_shown_together(tmp_path: Path) -> None:
    step = rate_step("/mnt/a", None, 350.0, 3.0, None, jobs=None, rate_fraction=0.5)
    step = replace(step, resolved={"jobs": 2, "rate": 175.0, "settings_applied": False})
    with open_store(str(tmp_path / "r.db")) as db:
        run_id = db.create_run("x", {}, STARTED)
        db.add_target(run_id, TargetRecord("/mnt/a", "local"))
        db.add_step(run_id, step)
        got = db.get_run(run_id)
    assert got is not None
    (read,) = got.steps
    assert read.params == step.params and read.resolved == step.resolved and not read.legacy
    (doc,) = got.document()["steps"]
    assert doc["asked"]["jobs"] is None and doc["resolved"]["jobs"] == 2
    assert doc["params"] == {**step.params, **step.resolved}  # as before: both merged
    # The test is what was asked: what was resolved or recorded does not make another test.
    legacy = replace(read, params={**read.params, **read.resolved}, resolved={}, legacy=True)
    facts = replace(read, resolved={**read.resolved, "fio_version": "3.33", "fstype": "ext4"})
    assert params_key("pgbench", read.all_params) == params_key("pgbench", legacy.all_params)
    assert params_key("pgbench", read.all_params) == params_key("pgbench", facts.all_params)


def fio_step(**resolved: JSONValue) -> StepRecord:
    metrics: dict[str, JSONValue] = {"write_iops": 900.0, "write_lat_avg_ms": 0.1,
                                     "sync_lat_avg_ms": 0.4}  # fmt: skip
    asked: dict[str, JSONValue] = {"profile": "wal-fsync", "size_bytes": 32 << 20, "runtime_s": 1}
    return StepRecord(
        "/mnt/t", "fio", asked, "completed", STARTED, STARTED, metrics=metrics, resolved=resolved
    )


def test_fio_trust_warnings_and_the_commit_ceiling_come_from_stored_facts() -> None:
    facts: dict[str, JSONValue] = {"direct": False, "ioengine": "libaio", "fstype": "tmpfs",
                                   "direct_refused": False, "flushes_every_write": True,
                                   "machine_memory_bytes": 4 << 30,
                                   "prefill_bytes": 16 << 20}  # fmt: skip
    (step,) = derive_run(run_of([fio_step(**facts)])).steps
    assert step.metrics["commit_latency_ms"] == 0.5
    assert step.metrics["commit_ceiling_tps"] == 2000.0
    assert len(step.warnings) == 2
    assert "/mnt/t is on tmpfs, which lives in memory" in step.warnings[0]
    assert "the prefill wrote 16 MiB of the 32 MiB" in step.warnings[1]
    buffered = {**facts, "fstype": "ext4", "direct_refused": True, "flushes_every_write": False}
    (step,) = derive_run(run_of([fio_step(**buffered)])).steps
    assert "commit_ceiling_tps" not in step.metrics
    assert "ext4 refuses direct I/O (O_DIRECT)" in step.warnings[0]
    assert "smaller than memory" in step.warnings[1]


def test_imported_fio_is_checked_from_its_options() -> None:
    step = fio_step()
    step.params.update(direct=False, rw="write", fdatasync=1, gtod_reduce=1)
    (got,) = derive_run(run_of([step], kind="import")).steps
    assert got.metrics["commit_ceiling_tps"] == 2000.0
    assert got.warnings == [
        "gtod_reduce=1: fio did not time each I/O, so latencies are not measured"
    ]


# -- a store written before derive-on-read (schema 3), rows as that howfast wrote them --------


def old_store(path: Path) -> None:
    """Schema 3, with a rate step whose verdict was frozen wrong, a duplicate warning, a fio
    step with its old commit figures, and sampled I/O with a stale summary."""
    with open_store(str(path), migrations=MIGRATIONS[:3]) as db:
        engine = db._engine
    frozen_rate: dict[str, JSONValue] = {
        "tps": 330.0, "latency_avg_ms": 20.0, "latency_p99_ms": 40.0,
        "schedule_lag_avg_ms": 900.0, "rate_offered": 400.0, "rate_met": True,
        "rate_verdict": "met (an older rule)", "io_data_write_iops": 12345.0,
    }  # fmt: skip
    sections = {
        "io": {"interval_s": 1.0, "roles": {"data": {
            "device": "sda", "seconds": 2.0, "delta": {"writes": 8},
            "summary": {"write_iops": 12345.0}}}},
    }  # fmt: skip
    old_warning = "the offered rate 400.0/s was not met: an older rule"
    with engine.begin() as conn:
        conn.execute(insert(runs).values(id=1, plan="rate-curve", status="completed",
                                         started_at=STARTED, finished_at=STARTED,
                                         environment={}))  # fmt: skip
        conn.execute(insert(targets).values(run_id=1, position=0, name="/mnt/a", kind="local",
                                            settings={}, device={}))  # fmt: skip
        rows = [
            ("pgbench", {"mode": "tpcb-like", "clients": 4, "jobs": 2, "duration_s": 60,
                         "rate": 400.0, "settings_applied": False}, frozen_rate,
             [old_warning], sections),
            ("fio", {"profile": "wal-fsync", "size_bytes": 1 << 25, "runtime_s": 1,
                     "direct": True, "ioengine": "libaio", "fio_version": "fio-3.33"},
             {"write_lat_avg_ms": 0.1, "sync_lat_avg_ms": 0.4, "commit_latency_ms": 0.5,
              "commit_ceiling_tps": 2000.0}, [], None),
        ]  # fmt: skip
        for position, (workload, params, metrics, warnings, step_sections) in enumerate(rows):
            conn.execute(
                text(
                    "INSERT INTO steps (run_id, position, target, workload, params, status,"
                    " started_at, finished_at, metrics, warnings, sections) VALUES (1, :p,"
                    " '/mnt/a', :w, :params, 'completed', :s, :s, :m, :warn, :sections)"
                ),
                {"p": position, "w": workload, "params": json.dumps(params), "s": STARTED,
                 "m": json.dumps(metrics), "warn": json.dumps(warnings),
                 "sections": json.dumps(step_sections) if step_sections else None},
            )  # fmt: skip


def test_a_run_stored_before_derive_on_read_shows_todays_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_store(path)
    with open_store(str(path)) as db:  # migrates to schema 4
        assert db.schema_version == len(MIGRATIONS)
        run = read_run(db, 1)
    assert run is not None
    rate, fio = run.steps
    assert rate.legacy and rate.resolved == {} and rate.params["jobs"] == 2
    assert rate.metrics["rate_met"] is False  # today's rule, not the frozen verdict
    assert rate.metrics["rate_verdict"] != "met (an older rule)"
    assert rate.metrics["io_data_write_iops"] == 4.0  # from the counters, again
    assert rate.sections["io"]["roles"]["data"]["summary"]["write_iops"] == 4.0
    assert rate.metrics["tps"] == 330.0
    not_met = [w for w in rate.warnings if w.startswith("the offered rate 400.0/s was not met")]
    assert len(not_met) == 2  # the older text stays; today's is added once
    assert len(set(rate.warnings)) == len(rate.warnings)
    # An older fio step does not say whether it flushed every write: its figures stay.
    assert fio.metrics["commit_ceiling_tps"] == 2000.0
    doc = run.document()
    assert doc["steps"][0]["params"]["settings_applied"] is False
    assert doc["steps"][0]["asked"] == doc["steps"][0]["params"]
    assert doc["steps"][0]["resolved"] == {}


def test_a_derived_warning_is_not_shown_twice(tmp_path: Path) -> None:
    step = rate_step("/mnt/a", 400.0, 330.0, 40.0, 900.0)
    once = derive_run(run_of([step])).steps[0].warnings
    again = derive_run(run_of([replace(step, warnings=once, legacy=True)])).steps[0].warnings
    assert once == again and len(once) == 1
