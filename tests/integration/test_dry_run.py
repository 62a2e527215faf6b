"""`howfast run --dry-run`: every tool's argv for every step and target, from the builders
that run them, and nothing created: no cluster, no file, no stored run, no password shown."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import PASSWORD, PgServer
from tests.integration.conftest import TINY_PLAN, Howfast

pytestmark = pytest.mark.integration

PLAN = (
    TINY_PLAN
    + """
[[steps]]
workload = "fio"
profiles = ["wal-fsync"]
size = "8MiB"
runtime = "2s"
"""
)


def test_dry_run_prints_every_invocation_and_creates_nothing(
    howfast: Howfast, target_dir: Path, pg_server: PgServer
):
    plan = howfast.plan(PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir), "--target", pg_server.dsn,
                  "--dry-run", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    local, server = doc["targets"]
    assert (local["kind"], local["host"], server["kind"], server["host"]) == (
        "local", "local", "dsn", "client"
    )  # fmt: skip
    assert [s["workload"] for s in local["steps"]] == [
        "pgbench-init", "pgbench", "pgbench", "pgbench", "fio"
    ]  # fmt: skip
    assert local["start"][0]["argv"][0].endswith("/initdb")
    init = local["steps"][0]["invocations"][0]["argv"]
    assert init[0].endswith("/pgbench") and init[1:4] == ["-i", "-s", "1"]
    # The round-trip probe first (workloads/pgbench/rtt.py), on the load's connection
    probe = local["steps"][1]["invocations"][0]
    assert probe["argv"][1:8] == ["-n", "-c", "1", "-j", "1", "-t", "1000"]
    assert probe["inputs"] == {"rtt.sql": "SELECT 1;\n"}
    select = local["steps"][1]["invocations"][1]["argv"]
    jobs = str(min(2, os.cpu_count() or 1))  # min(clients, cores)
    assert select[1:9] == ["-b", "select-only", "-c", "2", "-j", jobs, "-T", "1"]
    # The calibration run first (bare), then the step with its log sampled at a rate found then.
    calibration, measured = (i["argv"] for i in local["steps"][1]["invocations"][1:])
    assert "-l" not in calibration and "-P" not in calibration
    assert "--sampling-rate=SAMPLING" in measured and "-l" in measured and "-r" not in measured
    fio = local["steps"][4]["invocations"][0]
    assert fio["argv"][-1] == "wal-fsync.fio" and "fdatasync=1" in fio["inputs"]["wal-fsync.fio"]
    assert f"filename={target_dir}/howfast-" in fio["inputs"]["wal-fsync.fio"]
    # The server's steps connect to it with its address and never show its password.
    server_init = server["steps"][0]["invocations"][0]
    assert "127.0.0.1" in server_init["argv"] and server_init["secret_env"] == ["PGPASSWORD"]
    assert server["steps"][4]["invocations"][0]["note"].startswith("skipped")

    text = howfast("run", str(plan), "--target", str(target_dir), "--target", pg_server.dsn,
                   "--dry-run")  # fmt: skip
    assert text.returncode == 0, text.stderr
    assert "pgbench -b tpcb-like -c 2" in text.stdout and "PGPASSWORD=***" in text.stdout
    for output in (out, text):
        assert PASSWORD not in output.stdout + output.stderr
    assert list(target_dir.iterdir()) == []
    assert not howfast.store.exists()


def test_dry_run_shows_the_tcp_client(howfast: Howfast, target_dir: Path) -> None:
    plan = howfast.plan(PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir), "--client", "tcp",
                  "--dry-run", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    (local,) = json.loads(out.stdout)["targets"]
    assert "--auth-host=scram-sha-256" in local["start"][0]["argv"]
    probe = local["steps"][1]["invocations"][0]
    assert probe["argv"][-7:-3] == ["-h", "127.0.0.1", "-p", "PORT"]
    assert list(target_dir.iterdir()) == []


def test_a_memory_regime_on_a_server_elsewhere_is_refused_before_anything_runs(
    howfast: Howfast, pg_server: PgServer
):
    out = howfast("run", "quick", "--target", pg_server.dsn, "--dataset", "on-disk", "--yes")
    assert out.returncode == 2
    assert "memory of a server reached by URI is not visible" in out.stderr
    assert "--dataset SIZE" in out.stderr
    listed = howfast("results", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
