"""`howfast run` on a real local target: a throwaway cluster made with initdb, real pgbench."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.integration.conftest import TINY_PLAN, Howfast, postgres_pids_under

pytestmark = pytest.mark.integration


def test_tiny_plan_runs_every_builtin_mode_and_cleans_up(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(TINY_PLAN)
    argv = ("run", str(plan), "--target", str(target_dir), "--set", "work_mem=8MB", "--json")
    # as root, with a /dev/shm of its own: other sessions' files are not its leftovers
    out, left_in_shm = howfast.in_private_shm(*argv) if os.geteuid() == 0 else (howfast(*argv), [])
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)  # stdout holds exactly one JSON document
    assert doc["status"] == "completed"
    assert re.search(rf"run {doc['id']}\b", out.stderr)  # the id is printed at the start
    workloads = [(s["workload"], s["params"].get("mode")) for s in doc["steps"]]
    assert workloads == [
        ("pgbench-init", None),
        ("pgbench", "select-only"),
        ("pgbench", "tpcb-like"),
        ("pgbench", "simple-update"),
    ]
    init = doc["steps"][0]
    assert init["status"] == "completed"
    assert init["metrics"]["init_total_s"] > 0
    assert init["metrics"]["db_size_bytes"] > 10 * 1024 * 1024  # scale 1 is ~ 22 MB
    for step in doc["steps"][1:]:
        m = step["metrics"]
        assert step["status"] == "completed", step["error"]
        assert step["params"]["clients"] == 2 and step["params"]["jobs"] >= 1
        assert m["tps"] > 0 and m["transactions"] > 0
        # Percentiles come from the per-transaction log and must be ordered.
        assert 0 < m["latency_p50_ms"] <= m["latency_p99_ms"] <= m["latency_max_ms"]
        # Per-statement latencies (-r): parsed where howfast asks for them, not select-only's.
        assert bool(m.get("statements")) is (step["params"]["mode"] != "select-only")
        assert m["latency_samples"] >= 1
    target = doc["targets"][0]
    assert target["kind"] == "local"
    assert target["settings"]["work_mem"] == "8MB"  # --set reached the server
    assert target["settings"]["shared_buffers"] == "32MB"  # the plan's setting too
    assert target["device"]["data"]["fstype"]
    assert re.fullmatch(r"\d+\.\d+", target["pg_version"])
    # Nothing left: no cluster, no marker, no server, no run directory in /dev/shm.
    assert list(target_dir.iterdir()) == []
    assert postgres_pids_under(target_dir) == []
    assert left_in_shm == []  # nothing at all: run directories, PostgreSQL's shared memory


def test_series_and_histogram_are_stored(howfast: Howfast, target_dir: Path):
    # 3 s: a shorter step, started late on a loaded machine, may log no whole second (its
    # per-second series come from the log at select-only's rate), and leave no series
    plan = howfast.plan(
        TINY_PLAN.replace('"tpcb-like", "simple-update"', "").replace('"1s"', '"3s"')
    )
    assert howfast("run", str(plan), "--target", str(target_dir)).returncode == 0
    out = howfast("results", "show", "1", "--json", "--series")
    doc = json.loads(out.stdout)
    step = doc["steps"][1]
    assert len(step["series"]["tps"]) >= 1
    histogram = step["histograms"]["latency_us"]
    # Every logged transaction: all of them, or pgbench's sample at the rate it was given.
    assert sum(histogram.values()) == step["metrics"]["latency_samples"]
    if step["resolved"]["log_sampling_rate"] == 1.0:
        assert step["metrics"]["latency_samples"] == step["metrics"]["transactions"]
    else:
        assert step["metrics"]["latency_samples"] < step["metrics"]["transactions"]


def test_terminal_table_after_run(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(TINY_PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir))
    assert out.returncode == 0, out.stderr
    for heading in (
        "pgbench select-only",
        "pgbench tpcb-like",
        "TPS",
        "p99 latency ms",
        "conn time ms",
        "load (pgbench -i, scale 1)",
    ):
        assert heading in out.stdout


def test_wal_dir_on_another_directory(howfast: Howfast, target_dir: Path):
    wal = target_dir.parent / "wal"
    wal.mkdir()
    wal.chmod(0o755)
    plan = howfast.plan(TINY_PLAN.replace('"tpcb-like", "simple-update"', ""))
    out = howfast("run", str(plan), "--target", str(target_dir), "--wal-dir", str(wal), "--json")
    assert out.returncode == 0, out.stderr
    device = json.loads(out.stdout)["targets"][0]["device"]
    assert device["wal"]["path"].startswith(str(wal))
    assert list(wal.iterdir()) == [] and list(target_dir.iterdir()) == []


def test_keep_leaves_a_stopped_cluster(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(TINY_PLAN.replace('"tpcb-like", "simple-update"', ""))
    out = howfast("run", str(plan), "--target", str(target_dir), "--keep")
    assert out.returncode == 0, out.stderr
    kept = [p for p in target_dir.iterdir() if p.name.startswith("howfast-")]
    assert len(kept) == 1 and (kept[0] / "data" / "PG_VERSION").exists()
    assert not (kept[0] / "data" / "postmaster.pid").exists()  # stopped
    assert "kept the cluster" in out.stderr
    # A directory howfast used before (it carries the marker) may be used again.
    again = howfast("run", str(plan), "--target", str(target_dir))
    assert again.returncode == 0, again.stderr
    said = " ".join(again.stderr.split())  # the terminal's line breaks removed
    assert f"holds {kept[0].name} from an earlier run, kept with --keep" in said
    # howfast cleanup lists it as kept, and leaves it, --yes or not.
    out = howfast("cleanup", "--target", str(target_dir), "--yes", "--json")
    (listed,) = json.loads(out.stdout)["local"]["leftovers"]
    assert (listed["kind"], listed["state"], listed["removed"]) == ("cluster", "kept", False)
    assert (kept[0] / "data" / "PG_VERSION").exists()


def test_several_targets_run_the_same_steps_one_after_the_other(howfast: Howfast, target_dir):
    second = target_dir.parent / "second"
    second.mkdir()
    second.chmod(0o755)
    plan = howfast.plan(TINY_PLAN.replace('"tpcb-like", "simple-update"', ""))
    out = howfast("run", str(plan), "--target", str(target_dir), "--target", str(second), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    names = [t["name"] for t in doc["targets"]]
    assert names == [str(target_dir), str(second)]
    assert [s["target"] for s in doc["steps"]] == [names[0]] * 2 + [names[1]] * 2
    starts = [s["started_at"] for s in doc["steps"]]
    assert starts == sorted(starts)  # one target after the other, not interleaved
    assert list(second.iterdir()) == [] and list(target_dir.iterdir()) == []


def test_a_port_chosen_with_set_is_the_one_used(howfast: Howfast, target_dir: Path):
    from tests.conftest import free_port

    port = free_port()
    plan = howfast.plan(TINY_PLAN.replace('"tpcb-like", "simple-update"', ""))
    out = howfast("run", str(plan), "--target", str(target_dir), "--set", f"port={port}",
                  "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["targets"][0]["settings"]["port"] == str(port)
    assert [s["status"] for s in doc["steps"]] == ["completed", "completed"]
