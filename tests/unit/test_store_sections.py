"""Steps keep what the samplers saw (schema v2: steps.sections); older stores stay readable."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from howfast.model import StepRecord, TargetRecord
from howfast.store import MIGRATIONS, SCHEMA_VERSION, open_store

SECTIONS = {
    "io": {
        "roles": {
            "data": {"device": "loop0", "summary": {"write_iops": 469.0}},
            "wal": {"device": "loop1", "summary": {"write_iops": 1056.0}},
        },
        "write_amplification": 2.42,
    },
    "cpu": {"user_pct": 50.0, "load_generator": {"pid": 42, "cpu_pct": 24.0}},
    "postgres": {"server_version_num": 150018, "checkpoints": [{"reason": "wal"}]},
}


def step(sections: dict | None = None) -> StepRecord:
    return StepRecord(
        target="t",
        workload="pgbench",
        params={"mode": "tpcb-like", "clients": 8},
        status="completed",
        started_at="2026-11-22T10:00:00+00:00",
        finished_at="2026-11-22T10:02:00+00:00",
        metrics={"tps": 1000.0, "cache_hit_ratio": 0.99},
        sections=sections or {},
    )


def test_sections_round_trip_and_appear_in_the_document(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as store:
        run_id = store.create_run("checkpoints", {}, "2026-11-22T10:00:00+00:00")
        store.add_target(run_id, TargetRecord(name="t", kind="local"))
        store.add_step(run_id, step(SECTIONS))
        store.add_step(run_id, step())  # pgbench-init-like: not sampled
        run = store.get_run(run_id)
    assert run is not None
    assert run.steps[0].sections == SECTIONS
    assert run.steps[1].sections == {}
    doc = json.loads(json.dumps(run.document()))
    sampled, plain = doc["steps"]
    assert sampled["io"]["roles"]["wal"]["device"] == "loop1"
    assert sampled["cpu"]["load_generator"]["cpu_pct"] == 24.0
    assert sampled["postgres"]["checkpoints"] == [{"reason": "wal"}]
    assert (plain["io"], plain["cpu"], plain["postgres"]) == (None, None, None)


def test_a_v1_store_is_migrated_and_its_steps_have_no_sections(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    with open_store(path, migrations=MIGRATIONS[:1]) as v1:
        run_id = v1.create_run("quick", {}, "2026-01-01T00:00:00+00:00")
        v1.add_step(run_id, step())
    with open_store(path) as current:
        assert current.schema_version == SCHEMA_VERSION == len(MIGRATIONS) >= 2
        run = current.get_run(run_id)
        assert run is not None
        assert run.steps[0].sections == {}
        assert run.steps[0].metrics["tps"] == 1000.0
        assert run.document()["steps"][0]["io"] is None
        current.add_step(run_id, step(SECTIONS))
    with sqlite3.connect(path) as raw:
        rows = raw.execute("SELECT sections FROM steps ORDER BY id").fetchall()
    assert rows[0] == (None,)
    assert json.loads(rows[1][0]) == SECTIONS
