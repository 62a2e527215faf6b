"""`howfast run --dry-run`: every tool's argv for every step and target, from the builders
that run them, and nothing created: no cluster, no file, no stored run, no password shown."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from howfast.workloads.pgbench.logsampling import CALIBRATION_S, PROBE_TPS_SHARE
from tests.conftest import PASSWORD, PgServer
from tests.integration.conftest import TINY_PLAN, TINY_PLAN_AT_FULL_SPEED, Howfast

pytestmark = pytest.mark.integration

# at full speed: the calibration run before each mode's first step is among the invocations
PLAN = (
    TINY_PLAN_AT_FULL_SPEED
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


def test_dry_run_says_a_one_client_select_only_step_calibrates_only_if_its_probe_fails(
    howfast: Howfast, target_dir: Path
) -> None:
    """quick's first select-only step (one client) takes its log's expected rate from its
    round-trip probe (workloads/pgbench/logsampling.py): its calibration run is listed, with
    when it runs; the first tpcb-like step, also of one client, calibrates as before."""
    out = howfast("run", "quick", "--target", str(target_dir), "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    (local,) = json.loads(out.stdout)["targets"]
    first = {}
    for step in local["steps"]:
        if step["workload"] == "pgbench" and step["params"]["clients"] == 1:
            first[step["params"]["mode"]] = step["invocations"]
    probe, calibration, measured = first["select-only"]
    assert probe["inputs"] == {"rtt.sql": "SELECT 1;\n"}
    bare = ["-b", "select-only", "-c", "1", "-j", "1", "-T", str(CALIBRATION_S)]
    assert calibration["argv"][1:9] == bare
    assert calibration["note"] == (
        "a calibration run (unmeasured), only if no earlier step measured the rate "
        "and the round-trip probe failed"
    )
    assert f"{PROBE_TPS_SHARE} x 1000 / client_rtt_p50_ms" in measured["note"]
    _, calibration, measured = first["tpcb-like"]
    assert calibration["note"] == (
        "a calibration run (unmeasured), unless an earlier step measured the rate"
    )
    assert "round-trip probe" not in measured["note"]
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


# Each case: what a run refuses, given to --dry-run and to the run itself (issue 35: the dry run
# accepted all of these). Both go through the run service's one check of every target
# (Target.check_inputs), before anything runs: the same message and exit status, nothing made.
_REFUSED = [
    ("missing target", ["--target", "{missing}"], "target directory {missing} does not exist"),
    ("non-empty target", ["--target", "{full}"], "target directory {full} is not empty (data)"),
    ("missing WAL dir", ["--target", "{target}", "--wal-dir", "{missing}"],
     "WAL directory {missing} does not exist"),
    ("missing standby dir", ["--target", "{target}", "--replicas", "1", "--standby-dir",
                             "{missing}"], "standby directory {missing} does not exist"),
    ("non-empty standby dir", ["--target", "{target}", "--replicas", "1", "--standby-dir",
                               "{full}"], "standby directory {full} is not empty (data)"),
    ("/ as standby dir", ["--target", "{target}", "--replicas", "1", "--standby-dir", "/"],
     "standby directory / is not empty"),
    ("--keep with --replicas", ["--target", "{target}", "--replicas", "1", "--keep"],
     "--keep keeps one cluster; a primary with standbys is removed at the end"),
    ("--keep with ?replicas=", ["--target", "{target}?replicas=1", "--keep"],
     "--keep keeps one cluster"),
    ("missing fleet directory", ["fleet", "--target", "{missing}"],
     "target directory {missing} does not exist"),
    ("--event on a plan without pgbench", ["{fio_plan}", "--target", "{target}", "--event",
                                           "1s:checkpoint"],
     "--event 1s:checkpoint: plan 'fio-only' has no pgbench step"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "args", "said"), _REFUSED, ids=[c[0] for c in _REFUSED])
def test_the_dry_run_refuses_what_the_run_refuses_with_the_same_words(
    howfast: Howfast, target_dir: Path, tmp_path: Path, case: str, args: list[str], said: str
) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "data").write_text("not howfast's\n")
    fio_plan = howfast.plan(
        'name = "fio-only"\n[[steps]]\nworkload = "fio"\nprofiles = ["wal-fsync"]\n'
        'size = "8MiB"\nruntime = "1s"\n',
        name="fio-only.toml",
    )
    names = {"missing": tmp_path / "missing", "full": full, "target": target_dir,
             "fio_plan": fio_plan}  # fmt: skip
    argv = [a.format(**names) for a in args]
    if not argv[0].endswith(".toml") and argv[0] != "fleet":
        argv = [howfast.plan(TINY_PLAN).as_posix(), *argv]
    dry = howfast("run", *argv, "--dry-run")
    real = howfast("run", *argv, "--yes")
    expected = said.format(**names)
    for out in (dry, real):
        assert out.returncode == 2, (case, out.stdout[-500:], out.stderr[-1000:])
        assert expected in out.stderr, (case, out.stderr)
        assert "Traceback" not in out.stderr
    assert dry.stderr.splitlines()[-1] == real.stderr.splitlines()[-1]
    assert list(target_dir.iterdir()) == [] and list(full.iterdir()) == [full / "data"]
    assert not (tmp_path / "missing").exists()
    listed = howfast("results", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_a_probes_dry_run_refuses_the_directories_the_probe_refuses(
    howfast: Howfast, tmp_path: Path
) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "data").write_text("not howfast's\n")
    for directory, said in ((tmp_path / "missing", "does not exist"), (full, "is not empty")):
        dry = howfast("probe", str(directory), "--runtime", "1s", "--dry-run")
        real = howfast("probe", str(directory), "--runtime", "1s")
        for out in (dry, real):
            assert out.returncode == 2, out.stderr[-1000:]
            assert f"probe directory {directory} {said}" in out.stderr
        assert dry.stderr.splitlines()[-1] == real.stderr.splitlines()[-1]
    assert list(full.iterdir()) == [full / "data"] and not (tmp_path / "missing").exists()


def test_dry_run_masks_a_password_in_an_event_command(howfast: Howfast, target_dir: Path) -> None:
    """An exec event's command line is the user's text, printed back by --dry-run (text and
    JSON), which is pasted into tickets: a connection password in it is masked there."""
    plan = howfast.plan(TINY_PLAN)
    event = "0.5s:exec=echo postgresql://u:Dry-pw-9Q@db.example/app"
    for json_flag in ((), ("--json",)):
        out = howfast("run", str(plan), "--target", str(target_dir), "--event", event,
                      "--dry-run", *json_flag)  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "postgresql://u:" in out.stdout and "Dry-pw-9Q" not in out.stdout + out.stderr
