"""Standbys of a local target on real PostgreSQL (issue 28; docs/replication.md): built by base
backup, streaming and caught up before the steps, synchronous as asked, removed at the end."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from howfast.analysis.why import MIN_ACTIVE_SAMPLES
from howfast.errors import HowfastError
from howfast.machine.pgbin import choose_install
from howfast.targets import pgquery
from howfast.targets.base import Connection
from howfast.targets.local import LocalTarget, StandbyPlacement
from howfast.targets.osuser import server_user
from howfast.targets.replicas.local import LocalStandby
from howfast.targets.replicas.set import ReplicaSet
from howfast.targets.replicas.spec import ReplicaSpec
from tests.conftest import cgroup_dirs, shared_tmpdir
from tests.integration.conftest import Howfast, postgres_pids_under, stop_howfast, wait_for

pytestmark = pytest.mark.integration


def _cgroups(prefix: str) -> list[Path]:
    return cgroup_dirs(f"{prefix}*")


@pytest.fixture
def primary(target_dir: Path) -> Iterator[LocalTarget]:
    target = LocalTarget(target_dir, choose_install(), replicas=ReplicaSpec(1, "on"))
    try:
        yield target
    finally:
        target.stop()


def test_a_standby_streams_synchronously_and_goes_away(
    primary: LocalTarget, target_dir: Path
) -> None:
    conn = primary.start()
    assert conn is not None
    (standby,) = primary.standbys()
    assert isinstance(standby, LocalStandby)
    assert standby.data_dir.is_relative_to(primary.dirs.cluster_dir)
    with pgquery.connect(conn) as db:
        row = db.execute(
            "SELECT application_name, state, sync_state FROM pg_stat_replication"
        ).fetchone()
        assert row == ("standby_1", "streaming", "sync")
        assert db.execute("SHOW synchronous_standby_names").fetchone() == ("FIRST 1 (standby_1)",)
        db.execute("CREATE TABLE t AS SELECT 42 AS x")  # waits for the standby's flush
    assert standby.connection is not None
    with pgquery.connect(standby.connection) as db:
        assert db.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
    (record,) = primary.record().standbys
    assert record["name"] == "standby_1" and record["sync_state"] == "sync"
    assert str(record["version"]).split(".")[0].isdigit()
    token = primary.token
    assert standby.cgroup_name.startswith("howfast-standby-")
    had_cgroup = bool(_cgroups(standby.cgroup_name))
    primary.stop()
    assert postgres_pids_under(target_dir) == []
    assert not any(target_dir.glob("howfast-*"))
    assert _cgroups(f"howfast-io-{token}") == [] and _cgroups(standby.cgroup_name) == []
    print(f"the standby had its own I/O cgroup: {had_cgroup}")


def test_two_standbys_in_standby_dirs_with_sync_off(target_dir: Path) -> None:
    other = target_dir.parent / "standbys"
    other.mkdir()
    other.chmod(0o755)
    target = LocalTarget(
        target_dir,
        choose_install(),
        replicas=ReplicaSpec(2, "off"),
        standbys=StandbyPlacement(dirs=(other,)),
    )
    try:
        target.check(will_init=True)
        conn = target.start()
        assert conn is not None
        members = [m for m in target.standbys() if isinstance(m, LocalStandby)]
        assert [m.name for m in members] == ["standby_1", "standby_2"]
        assert len({m.port for m in members}) == 2
        assert all(m.root.parent == other for m in members)
        with pgquery.connect(conn) as db:
            rows = db.execute(
                "SELECT application_name, sync_state FROM pg_stat_replication ORDER BY 1"
            ).fetchall()
            assert db.execute("SHOW synchronous_commit").fetchone() == ("on",)
        assert rows == [("standby_1", "async"), ("standby_2", "async")]
    finally:
        target.stop()
    assert postgres_pids_under(other) == [] and postgres_pids_under(target_dir) == []
    assert sorted(p.name for p in other.iterdir()) == []


def test_a_standby_that_cannot_connect_names_itself_and_its_log(target_dir: Path) -> None:
    """A standby given a wrong port for its primary: the error says which, that it is not
    connected, and quotes its log; stop() leaves nothing."""
    target = LocalTarget(target_dir, choose_install())
    conn = target.start()
    assert conn is not None and target.dirs.run_dir is not None
    user = server_user()
    standby = LocalStandby(
        "standby_1",
        target.install,
        user,
        target.dirs.cluster_dir / "standby_1",
        target.dirs.run_dir,
    )
    try:
        standby.build(conn)
        # Point it at a port where nothing listens, as a standby on a dead primary would be.
        auto = standby.data_dir / "postgresql.auto.conf"
        text = auto.read_text().replace(f"port={conn.port}", "port=1")
        auto.write_text(text)
        standby.start()
        replicas = ReplicaSet(ReplicaSpec(1, "on"), conn, [standby])
        with pytest.raises(HowfastError) as caught:
            replicas.wait_streaming(timeout_s=3)
        message = str(caught.value)
        assert "standby_1" in message and "not connected" in message
        assert "could not connect to the primary server" in message
    finally:
        standby.stop()
        target.stop()
    assert postgres_pids_under(target_dir) == []


def test_the_base_backup_refused_names_the_standby(target_dir: Path) -> None:
    """The user's settings win over howfast's replication settings: max_wal_senders=0 makes
    the primary refuse the base backup, and the error quotes pg_basebackup."""
    target = LocalTarget(
        target_dir,
        choose_install(),
        settings={"max_wal_senders": "0"},
        replicas=ReplicaSpec(1, "on"),
    )
    try:
        with pytest.raises(HowfastError) as caught:
            target.start()
    finally:
        target.stop()
    assert "standby_1" in str(caught.value)
    assert "max_wal_senders" in str(caught.value)
    assert postgres_pids_under(target_dir) == []
    assert not any(target_dir.glob("howfast-*"))


def test_sync_on_waits_for_the_standby(primary: LocalTarget) -> None:
    """With the standby stopped, a commit on a sync-on primary waits for it (SyncRep) until
    canceled: the design is in force, not only a setting."""
    conn = primary.start()
    assert conn is not None
    (standby,) = primary.standbys()
    assert isinstance(standby, LocalStandby)
    standby.stop()
    notices: list[str] = []
    with psycopg.connect(**_kwargs(conn), autocommit=True) as db:  # type: ignore[arg-type]
        db.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
        # statement_timeout does not end a commit's wait; a cancel request does
        timer = threading.Timer(1.0, db.cancel)
        timer.start()
        started = time.monotonic()
        db.execute("CREATE TABLE waits AS SELECT 1 AS x")
        waited = time.monotonic() - started
        timer.join()
    assert waited >= 0.9
    assert any("synchronous replication" in n for n in notices), notices


def _kwargs(conn: Connection) -> dict[str, object]:
    return dict(conn.psycopg_kwargs())


@pytest.fixture(scope="module")
def streaming_primary() -> Iterator[LocalTarget]:
    """A started primary with a sync standby, shared by the tests that only look at it or
    write to it (neither stops a server nor changes a setting): one base backup for them."""
    base = shared_tmpdir("howfast-target-")
    target_dir = base / "bench"
    target_dir.mkdir()
    target_dir.chmod(0o755)
    target = LocalTarget(target_dir, choose_install(), replicas=ReplicaSpec(1, "on"))
    try:
        target.start()
        yield target
    finally:
        target.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_no_standby_runs_as_root(streaming_primary: LocalTarget) -> None:
    primary = streaming_primary
    (standby,) = primary.standbys()
    assert isinstance(standby, LocalStandby) and standby.postmaster is not None
    status = Path(f"/proc/{standby.postmaster.pid}/status").read_text()
    uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
    assert int(uid) != 0 or os.geteuid() != 0


def test_the_replication_sampler_sees_lags_and_wal(streaming_primary: LocalTarget) -> None:
    """The sampler on a real primary with a sync standby while pgbench writes: lag series per
    standby, WAL sent and replayed, the standby's sync state."""
    import subprocess

    from howfast.samplers.base import SamplerContext
    from howfast.samplers.plugin import SamplerSetup
    from howfast.samplers.replication import SAMPLER

    primary = streaming_primary
    conn = primary.connection
    assert conn is not None
    pgbench = str(primary.install.program("pgbench"))
    subprocess.run([pgbench, "-i", "-s", "1", "-q", *conn.pgbench_args()], check=True,
                   capture_output=True)  # fmt: skip
    psql = str(primary.install.program("psql"))

    def wal_lsn() -> int:  # the primary's WAL position, in bytes
        query = "select pg_current_wal_lsn() - '0/0'"
        text = subprocess.run([psql, "-XAtc", query, *conn.pgbench_args()], check=True,
                              capture_output=True, text=True).stdout  # fmt: skip
        return int(float(text))

    sampler = SAMPLER.create(SamplerSetup(primary, conn))
    assert sampler is not None
    sampler.start(SamplerContext(primary, conn))  # reads where the WAL positions start
    wal_before = wal_lsn()
    # 3 s loads until the sampler (a thread of this process, once a second) has read at least
    # 3 times during them: on a machine busy enough, one 3 s load saw too few readings for a
    # lag series (the standby's lags are NULL once it has caught up and gone idle).
    read_under_load = 0
    for _ in range(10):
        before = sampler.readings
        subprocess.run([pgbench, "-n", "-c", "1", "-T", "3", *conn.pgbench_args()],
                       check=True, capture_output=True)  # fmt: skip
        read_under_load += sampler.readings - before
        if read_under_load >= 3:
            break
    wal_written = wal_lsn() - wal_before
    # One more reading after the load, however late this machine's sampler thread runs: then
    # every byte of the load's WAL (sent at commit: the standby is synchronous) is counted.
    # (A fixed 100 kB floor failed on a loaded machine: 3 s of load wrote less.)
    readings_at_end = sampler.readings
    deadline = time.monotonic() + 60
    while sampler.readings <= readings_at_end and time.monotonic() < deadline:
        time.sleep(0.05)
    out = sampler.stop()
    assert not [w for w in out.warnings if "sampler" in w], out.warnings
    section = out.sections["postgres"]["replication"]
    assert isinstance(section, dict) and isinstance(section["standbys"], dict)
    standby = section["standbys"]["standby_1"]
    assert isinstance(standby, dict)
    assert standby["state"] == "streaming" and standby["sync_state"] == "sync"
    assert wal_written > 0
    # every commit's WAL was sent before pgbench saw it committed; what the position holds
    # beyond the last commit (a background record not yet flushed) is less than a WAL page
    assert isinstance(standby["sent_bytes"], int) and standby["sent_bytes"] >= wal_written - 8192
    assert isinstance(standby["replayed_bytes"], int) and standby["replayed_bytes"] > 0
    flush = out.series["replication.standby_1.flush_lag_ms"]
    assert len(flush) >= 2 and all(0 < p.value < 1000 for p in flush)


def test_no_sampler_without_standbys(target_dir: Path) -> None:
    from howfast.samplers.plugin import SamplerSetup
    from howfast.samplers.replication import SAMPLER

    plain = LocalTarget(target_dir, choose_install())
    conn = Connection("/nowhere", 1, "howfast", "postgres")
    assert SAMPLER.create(SamplerSetup(plain, conn)) is None


# -- through the CLI -------------------------------------------------------------------------

# Every transaction logged (`latency_log = "full"`): what these tests check (standbys, waits,
# lags, I/O, cleanup) does not come from the latency log, and a sampled log needs a calibration
# run of up to 2 s before the step (workloads/pgbench/logsampling.py).
TINY_PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "{duration}"
latency_log = "full"
"""
# A step that only holds the servers while the test interrupts or kills the run: 50
# transactions/s, not flat out (what these tests check does not depend on throughput).
HOLD_PLAN = TINY_PLAN.format(duration="60s") + "rate = 50\n"


def _left_behind(*directories: Path) -> list[str]:
    """What of a run is still there: processes working under the directories, howfast-*
    entries in them, I/O accounting cgroups of standbys."""
    left = [f"pid {p}" for d in directories for p in postgres_pids_under(d)]
    left += [str(p) for d in directories for p in d.glob("howfast-*")]
    return left


def _standby_cgroups_working_under(directory: Path) -> set[Path]:
    """The standby I/O cgroups holding a process whose command line names `directory`."""
    found = set()
    for cgroup in _cgroups("howfast-standby-"):
        with contextlib.suppress(OSError):  # a cgroup or a process that just went away
            for pid in (cgroup / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    if str(directory).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                        found.add(cgroup)
    return found


def test_run_quick_with_a_sync_standby(howfast: Howfast, target_dir: Path) -> None:
    """The issue's done-when: every pgbench step has replication lags and a SyncRep share,
    the primary has the design's settings, nothing is left afterwards. The standby's data is
    inside the primary's cluster directory (the default): its role names the primary's device
    and shares its samples, so no device sum counts it twice, and the design counts the
    standby by its own I/O (checked on this run rather than on a run of its own)."""
    # This run's standby cgroups, told from those of other runs on this machine (make test
    # runs test_replicas_emulated.py beside this file) by the processes in them.
    seen: set[Path] = set()
    scans: list[bool] = []  # the scans that completed (a cgroup tree changing under one fails it)
    done = threading.Event()

    def watch() -> None:
        while not done.wait(1.0):  # the standby lives for every step: 20 s or more
            with contextlib.suppress(OSError):
                seen.update(_standby_cgroups_working_under(target_dir))
                scans.append(True)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:  # --scale 1: quick's scale 10 (150 MB to load and stream) adds nothing here
        out = howfast("run", "quick", "--target", str(target_dir), "--replicas", "1",
                      "--sync", "on", "--modes", "tpcb-like", "--clients", "1",
                      "--duration", "5s", "--scale", "1", "--json")  # fmt: skip
    finally:
        done.set()
        watcher.join()
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    (record,) = doc["targets"]
    assert record["name"] == f"{target_dir} with 1 sync standby (on)"
    assert record["settings"]["synchronous_standby_names"] == "FIRST 1 (standby_1)"
    assert record["settings"]["synchronous_commit"] == "on"
    (standby,) = record["standbys"]
    assert standby["name"] == "standby_1" and standby["sync_state"] == "sync"
    assert standby["version"] == record["pg_version"]
    assert standby["location"].startswith(f"{target_dir}/howfast-")
    assert standby["port"] > 0 and "device" in standby
    steps = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    assert steps and all(s["status"] == "completed" for s in steps)
    for step in steps:
        m = step["metrics"]
        assert m["replication_flush_lag_p50_ms"] > 0
        assert m["replication_flush_lag_p99_ms"] >= m["replication_flush_lag_p50_ms"]
        assert m["replication_write_lag_p50_ms"] > 0 and m["replication_replay_lag_p50_ms"] > 0
        assert m["replication_sent_bytes"] > 0 and m["replication_replayed_bytes"] > 0
        assert 0 < m["wait_syncrep_share"] <= 1
        # The standby's own writes (its I/O cgroup or its processes), and the design's
        assert m["standby_write_bytes"] > 0
        assert m["design_write_bytes"] == m["pg_write_bytes"] + m["standby_write_bytes"]
        assert m["design_write_bytes_per_tx"] > 0
        assert "standby_1" in step["io"]["standbys"]
        _assert_a_role_counted_once(step, target_dir)
    assert _left_behind(target_dir) == []
    # Its cgroups are gone (others' runs on this machine may have theirs meanwhile)
    token = Path(standby["location"]).parent.name.removeprefix("howfast-")
    assert _cgroups(f"howfast-io-{token}") == []
    print(f"this run's standby cgroups: {sorted(c.name for c in seen)}, {len(scans)} scans")
    assert scans, "no scan of the cgroups completed while the run lasted"
    assert [c for c in seen if c.exists()] == []


def test_sync_on_waits_for_the_standby_and_off_does_not(howfast: Howfast, target_dir: Path) -> None:
    """The same directory with a synchronous and an asynchronous standby, one run: commits
    wait for the standby (IPC:SyncRep) only with sync on."""
    plan = howfast.plan(TINY_PLAN.format(duration="4s"))
    on, off = f"{target_dir}?replicas=1&sync=on", f"{target_dir}?replicas=1&sync=off"
    out = howfast("run", str(plan), "--target", on, "--target", off, "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    names = [t["name"] for t in doc["targets"]]
    assert names == [f"{target_dir} with 1 sync standby (on)", f"{target_dir} with 1 async standby"]
    found = {s["target"]: s["metrics"] for s in doc["steps"] if s["workload"] == "pgbench"}
    sync_on, sync_off = found[names[0]], found[names[1]]
    print(f"tps sync on {sync_on['tps']:.0f}, off {sync_off['tps']:.0f}; SyncRep share on "
          f"{sync_on['wait_syncrep_share']}, off {sync_off['wait_syncrep_share']}; flush lag "
          f"p50 on {sync_on['replication_flush_lag_p50_ms']} ms")  # fmt: skip
    assert sync_on["wait_syncrep_share"] >= 0.10
    assert sync_off["wait_syncrep_share"] == 0
    steps = {s["target"]: s for s in doc["steps"] if s["workload"] == "pgbench"}
    why = {name: step["why"] for name, step in steps.items()}
    print(f"why, sync on: {why[names[0]]['verdict']}: {why[names[0]]['verdict_reason']}")
    # The rule holds, so it is the verdict or beside it, when the share is large enough and
    # drawn from enough active samples: on a loaded machine one client of a 4 s step can be
    # active in fewer than MIN_ACTIVE_SAMPLES, and then no wait-based rule decides (why.py).
    active = steps[names[0]]["postgres"]["wait_sampling"]["active_samples"]
    if sync_on["wait_syncrep_share"] >= 0.30 and active >= MIN_ACTIVE_SAMPLES:
        held = [why[names[0]]["verdict"], *why[names[0]]["also"]]
        assert "synchronous replication" in held, why[names[0]]
    assert "synchronous replication" not in [why[names[1]]["verdict"], *why[names[1]]["also"]]
    assert sync_off["replication_sent_bytes"] > 0  # the async standby streamed too
    off_settings = doc["targets"][1]["settings"]
    assert off_settings.get("synchronous_standby_names", "") == ""
    assert _left_behind(target_dir) == []
    # The designs side by side, in results show and the report
    report = target_dir.parent / "report.md"
    shown, made = howfast.together(
        ["results", "show", str(doc["id"])], ["report", str(doc["id"]), "-o", str(report)]
    )
    assert shown.returncode == 0 and "designs side by side" in shown.stdout, shown.stdout
    assert "1 sync standby (on)" in shown.stdout and "1 async standby" in shown.stdout
    assert made.returncode == 0, made.stderr[-2000:]
    assert "Designs side by side" in report.read_text()


def test_ctrl_c_during_a_step_leaves_nothing(howfast: Howfast, target_dir: Path) -> None:
    plan = howfast.plan(HOLD_PLAN)
    proc = howfast.popen("run", str(plan), "--target", f"{target_dir}?replicas=2")
    wait_for(proc, "[2/2]")
    time.sleep(1.5)
    standbys = sorted(target_dir.glob("howfast-*/standby_*/data"))
    assert len(standbys) == 2 and all(postgres_pids_under(s) for s in standbys)
    _, err = stop_howfast(proc)
    assert proc.returncode == 130, err[-2000:]
    assert _left_behind(target_dir) == []


def test_ctrl_c_during_the_base_backup_leaves_nothing(howfast: Howfast, target_dir: Path) -> None:
    """SIGINT once the second standby's directory exists (its base backup has begun)."""
    plan = howfast.plan(TINY_PLAN.format(duration="5s"))
    proc = howfast.popen("run", str(plan), "--target", f"{target_dir}?replicas=2")
    deadline = time.monotonic() + 120
    while not list(target_dir.glob("howfast-*/standby_2")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.01)
    _, err = stop_howfast(proc)
    assert proc.returncode == 130, err[-2000:]
    assert _left_behind(target_dir) == []


def test_a_killed_run_is_cleaned_up(howfast: Howfast, target_dir: Path) -> None:
    """SIGKILL (nothing can be caught): `howfast cleanup --yes` stops the primary and the
    standbys working in the target directory and removes them."""
    plan = howfast.plan(HOLD_PLAN)
    proc = howfast.popen("run", str(plan), "--target", f"{target_dir}?replicas=1")
    wait_for(proc, "[2/2]")
    (standby,) = target_dir.glob("howfast-*/standby_1/data")
    assert postgres_pids_under(standby)
    proc.kill()
    proc.communicate(timeout=30)
    out = howfast("cleanup", "--target", str(target_dir), "--yes")
    assert out.returncode == 0, out.stderr[-2000:]
    assert _left_behind(target_dir) == []


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("replicas=-1", "not in the range 0<=x<=8"),
        ("sync=on", "--sync needs standbys: give --replicas N (N >= 1) or ?replicas=N"),
        (
            "replica=1",
            "unknown option replica (did you mean replicas?); the options: replicas, sync, "
            "standby_dir, standby_latency, client",
        ),
    ],
)
def test_bad_designs_are_refused_before_anything(
    howfast: Howfast, target_dir: Path, query: str, said: str
) -> None:
    plan = howfast.plan(TINY_PLAN.format(duration="1s"))
    out = howfast("run", str(plan), "--target", f"{target_dir}?{query}")
    assert out.returncode == 2 and said in out.stderr, out.stderr[-2000:]
    assert list(target_dir.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a private /dev/shm needs root (unshare)")
def test_standbys_leave_no_shared_memory(howfast: Howfast, target_dir: Path) -> None:
    """In a /dev/shm of its own, a run with two standbys leaves no PostgreSQL.* segment and
    no run directory there."""
    plan = howfast.plan(TINY_PLAN.format(duration="2s"))
    out, left = howfast.in_private_shm("run", str(plan), "--target", f"{target_dir}?replicas=2")
    assert out.returncode == 0, out.stderr[-2000:]
    assert left == []
    assert _left_behind(target_dir) == []


def test_the_dry_run_shows_each_standby(howfast: Howfast, target_dir: Path) -> None:
    out = howfast("run", "quick", "--target", f"{target_dir}?replicas=2&sync=remote_apply",
                  "--dry-run", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    (target,) = json.loads(out.stdout)["targets"]
    whats = [s["what"] for s in target["start"]]
    assert whats[2:] == [
        "standby_1: base backup from the primary, as the server's OS user",
        "standby_1: the standby server, in its own session",
        "standby_2: base backup from the primary, as the server's OS user",
        "standby_2: the standby server, in its own session",
        "the primary: in postgresql.conf once the standbys stream, then a reload",
    ]
    backup = target["start"][4]["argv"]
    assert backup[-5:] == ["-C", "-S", "standby_2", "--no-password", "--no-sync"]
    assert "PORT" in backup
    assert target["start"][-1]["argv"] == [
        'synchronous_standby_names = "FIRST 2 (standby_1, standby_2)"',
        'synchronous_commit = "remote_apply"',
    ]
    assert list(target_dir.iterdir()) == []  # nothing created


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--replicas", "-1"], "-1 is not in the range 0<=x<=8"),
        (["--sync", "on"], "--sync needs standbys: give --replicas N (N >= 1) or ?replicas=N"),
        (["--replicas", "2", "--standby-dir", "/tmp", "--standby-dir", "/var/tmp",
          "--standby-dir", "/"], "give one --standby-dir, or one per standby (2), not 3"),
        (["--replicas", "1", "--keep"], "--keep keeps one cluster; a primary with standbys"),
        (["--replicas", "1", "--set", "synchronous_commit=off"],
         "--sync on sets synchronous_commit: drop one of them"),
    ],
)  # fmt: skip
def test_bad_run_options_are_refused_before_anything(
    howfast: Howfast, target_dir: Path, args: list[str], said: str
) -> None:
    plan = howfast.plan(TINY_PLAN.format(duration="1s"))
    out = howfast("run", str(plan), "--target", str(target_dir), *args)
    assert out.returncode == 2 and said in out.stderr, out.stderr[-2000:]
    assert [p.name for p in target_dir.iterdir() if p.name.startswith("howfast-")] == []


def test_replicas_on_a_server_howfast_did_not_create(howfast: Howfast) -> None:
    out = howfast("run", "quick", "--target", "postgresql://bench@127.0.0.1:1/bench",
                  "--replicas", "1")  # fmt: skip
    assert out.returncode == 2, out.stderr[-2000:]
    assert (
        "postgresql://bench@127.0.0.1:1/bench: howfast does not add standbys to a server it "
        "did not create" in out.stderr
    )
    assert "run without --replicas" in out.stderr and "pg_stat_replication" in out.stderr


def test_a_plans_design_gives_the_standbys(howfast: Howfast, target_dir: Path) -> None:
    plan = howfast.plan('[design]\nreplicas = 1\nsync = "off"\n' + TINY_PLAN.format(duration="2s"))
    out = howfast("run", str(plan), "--target", str(target_dir), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    (record,) = json.loads(out.stdout)["targets"]
    assert record["name"] == f"{target_dir} with 1 async standby"
    assert [(s["name"], s["sync_state"]) for s in record["standbys"]] == [("standby_1", "async")]
    assert _left_behind(target_dir) == []


def test_the_replication_plan_on_one_target_says_it_compares_designs(
    howfast: Howfast, target_dir: Path
) -> None:
    one = howfast("run", "replication", "--target", str(target_dir), "--dry-run")
    assert one.returncode == 0 and "the replication plan compares designs" in one.stderr
    two = howfast("run", "replication", "--target", str(target_dir),
                  "--target", f"{target_dir}?replicas=1", "--dry-run")  # fmt: skip
    assert two.returncode == 0 and "compares designs" not in two.stderr, two.stderr[-2000:]
    assert "standby_1: base backup from the primary" in two.stdout


RESTART_PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "3s"
latency_log = "full"
settings = {shared_buffers = "48MB"}  # a restart of the primary before this step
"""


def test_a_primary_restarted_for_a_step_finds_its_standby_again(
    howfast: Howfast, target_dir: Path
) -> None:
    """A step setting that needs a restart: the standby reconnects (its walreceiver retries)
    and the step, which waits for it at every commit, measures the design again."""
    plan = howfast.plan(RESTART_PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir), "--replicas", "1", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    (step,) = [s for s in json.loads(out.stdout)["steps"] if s["workload"] == "pgbench"]
    assert step["status"] == "completed", step["error"]  # the restart and the wait held
    assert "settings_applied" not in step["resolved"]  # (False when the target refused)
    standby = step["postgres"]["replication"]["standbys"]["standby_1"]
    assert standby["state"] == "streaming" and standby["sync_state"] == "sync"
    assert step["metrics"]["wait_syncrep_share"] > 0
    assert _left_behind(target_dir) == []


def test_a_killed_run_with_a_standby_dir_is_cleaned_up(howfast: Howfast, target_dir: Path) -> None:
    other = target_dir.parent / "standbys"
    other.mkdir()
    other.chmod(0o755)
    plan = howfast.plan(HOLD_PLAN)
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                         "--standby-dir", str(other))  # fmt: skip
    wait_for(proc, "[2/2]")
    (standby,) = other.glob("howfast-*/data")
    assert postgres_pids_under(standby)
    proc.kill()
    proc.communicate(timeout=30)
    for directory in (target_dir, other):
        out = howfast("cleanup", "--target", str(directory), "--yes")
        assert out.returncode == 0, out.stderr[-2000:]
    assert _left_behind(target_dir, other) == []


def _assert_a_role_counted_once(step: dict[str, Any], target_dir: Path) -> None:
    """A standby inside the primary's cluster directory: its role names the primary's device
    and shares its samples, so no device sum counts it twice; the design counts the standby
    by its own I/O (processes)."""
    roles, m = step["io"]["roles"], step["metrics"]
    data, standby = roles["data"], roles["standby_1"]
    assert data["device"] and standby["device"] == data["device"]
    assert standby["same_device_as"] == "data" and standby["standby"] == "standby_1"
    assert standby["path"].startswith(str(target_dir)) and standby["path"].endswith("/data")
    assert "delta" not in standby and "io_standby_1_write_bytes" not in m  # sampled once
    sampled = [r for r in roles.values() if "delta" in r]
    assert step["io"]["device_write_bytes"] == sum(r["summary"]["write_bytes"] for r in sampled)
    assert step["io"]["device_write_bytes"] == m["io_data_write_bytes"]
    assert step["io"]["standby_writes"]["standby_1"]["source"] == "processes"
    assert m["design_write_bytes"] == m["pg_write_bytes"] + m["standby_write_bytes"]
    print(f"device {data['device']}: {m['io_data_write_bytes']} bytes written (primary and "
          f"standby); primary's own {m['pg_write_bytes']}, standby's own "
          f"{m['standby_write_bytes']}; design per tx "
          f"{m['design_write_bytes_per_tx']}")  # fmt: skip
