"""Failover during a pgbench step on a real local target with one standby (PostgreSQL, the
postgres OS user): the primary is killed like a failed node, standby_1 promoted, the surviving
load goes on on the new primary, and the acknowledged commits the new primary lacks are counted
(docs/events.md). With --sync on none may be lost; with --sync off the loss is whatever the
count finds, and the figure must be that count."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from howfast.analysis import events as figures
from howfast.analysis.loadrecord import LoadRecord
from howfast.event_marks import marks_from_section
from howfast.store import open_store
from howfast.targets.emulated.volume import available
from howfast.targets.leftovers.machine import read_cgroups
from tests.conftest import cgroup_dirs
from tests.integration.conftest import (
    QUICK_WITHOUT_FIO,
    Howfast,
    postgres_pids_under,
    postgres_shared_memory,
    shared_memory_of,
    stop_howfast,
    wait_for,
)

pytestmark = pytest.mark.integration

# The plans here log every transaction (`latency_log = "full"`), as a sampled log of these
# few hundred commits a second would anyway: without it each step of a new test first runs
# an unmeasured calibration of a second to learn that (workloads/pgbench/logsampling.py).
TWO_STEPS = """
[[steps]]
workload = "pgbench-init"
scale = 2
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2, 1]
duration = "10s"
latency_log = "full"
"""

# One short event step after the load, without quick's fio probes.
EVENT_STEP = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [{clients}]
duration = "{duration}"
latency_log = "full"
"""


def _cgroups(token: str) -> list[Path]:
    return cgroup_dirs(f"howfast-*{token}*")


def _left_for_good(since: set[Path], wait_s: float = 20) -> list[str]:
    """The standby cgroups made since `since` that are empty, with no live howfast holding
    their owner lock (taken before the mkdir, let go after the rmdir), throughout `wait_s`:
    as `howfast cleanup` reads them. Other workers' runs make standby cgroups that are so
    for a moment: made before their server is born, or emptied by `howfast cleanup` of a
    killed run before it removes them, or owned from a private /dev/shm whose lock this
    test cannot see (CI saw one counted as this run's leftover). Those are filled or
    removed within seconds; this run's own leftover would stay."""

    def left_now() -> set[str]:
        return {
            c.path
            for c in read_cgroups()
            if "-standby-" in c.path and Path(c.path) not in since
            and not c.pids and not c.lock_held
        }  # fmt: skip

    left = left_now()
    deadline = time.monotonic() + wait_s
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left &= left_now()
    return sorted(left)


def _base_backups_into(root: Path) -> list[int]:
    """PIDs of the pg_basebackup processes writing under `root`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"pg_basebackup") and str(root).encode() in b" ".join(argv):
            found.append(int(entry.name))
    return found


def _event_step(doc: dict[str, object]) -> dict[str, object]:
    steps = doc["steps"]
    assert isinstance(steps, list)
    return next(s for s in steps if s["workload"] == "pgbench" and s["status"] != "skipped")


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the servers run as their own OS user")


def test_failover_with_sync_on_loses_nothing_and_the_load_goes_on(
    howfast: Howfast, target_dir: Path
) -> None:
    """The task's command: the event is verified (the promoted standby out of recovery on a
    new timeline, the old postmaster gone), the load commits on the new primary after it, no
    acknowledged commit is missing there, and nothing is left: no process, directory, cgroup,
    shared memory."""
    quick = str(howfast.plan(QUICK_WITHOUT_FIO, "quick.toml"))  # the probe adds nothing here
    out, shm_left = howfast.in_private_shm(
        "run", quick, "--target", str(target_dir), "--replicas", "1", "--sync", "on",
        "--clients", "2", "--modes", "tpcb-like", "--duration", "10s",
        "--event", "4s:failover", "--json",
        "--scale", "1",  # quick's scale 10 (150 MB to load and stream) adds nothing here
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    step = _event_step(doc)
    assert step["status"] == "completed", step["error"]
    (event,) = step["events"]  # type: ignore[misc]
    print(f"sync on: {event['line']}; in doubt {event['in_doubt']}")
    assert event["verified"] is True, event["problem"]
    evidence = event["evidence"]
    assert evidence["promoted"] == "standby_1" and evidence["in_recovery_after"] is False
    assert evidence["timeline_after"] > evidence["timeline_before"]
    assert evidence["old_primary_gone"] is True
    assert event["downtime_s"] > 0
    assert event["lost_commits"] == 0
    assert event["tps_after"] > 0  # the load committed on the new primary
    assert "4s:failover applied" in out.stderr
    # the samplers followed the load to the new primary (docs/samplers.md)
    assert not [w for w in step["warnings"] if w.startswith("sampler ")], step["warnings"]
    postgres = step["postgres"]
    assert postgres["wait_sampling"]["reconnects"] >= 1
    assert postgres["stats_sampling"]["stretches"] == 2  # another server's counters after
    token = next(iter(doc["targets"]))["standbys"][0]["location"].split("/")[-2]
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []
    assert _cgroups(token.removeprefix("howfast-")) == []
    assert shm_left == []


def test_a_restart_then_a_failover_with_sync_on_lose_nothing(
    howfast: Howfast, target_dir: Path
) -> None:
    """The restart's first transactions wait in COMMIT for the standby to reconnect (5 s):
    their rows carry a time inside the restart's outage. Counted in windows cut between
    segments, neither event loses a commit (cut at the outage's middle, the failover showed
    1 to 2 lost: analysis/events.py)."""
    plan = howfast.plan(EVENT_STEP.format(clients=2, duration="9s"))
    out = howfast("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                  "--sync", "on", "--event", "2s:restart", "--event", "5s:failover",
                  "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    step = _event_step(json.loads(out.stdout))
    assert step["status"] == "completed", step["error"]
    restart, failover = step["events"]  # type: ignore[misc]
    print(f"{restart['line']}\n{failover['line']}")
    assert restart["verified"] is True and failover["verified"] is True
    # the failover waited for the restart, which waited for the standby to stream again
    assert failover["applied_s"] >= restart["back_s"]
    for event in (restart, failover):
        assert event["lost_commits"] == 0, event["line"]
        # at most the clients cut in COMMIT, whose commit may not have happened
        assert event["lost_commits_max"] <= event["in_doubt"] <= 2, event["line"]
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []


def test_a_crash_then_a_failover_promote_a_standby_that_streams(
    howfast: Howfast, target_dir: Path
) -> None:
    """After a crash the standby's walreceiver reconnects only after up to 5 s: the crash is
    back once the standby streams again (as a restart is), so the failover after it promotes
    a synchronous standby that streams, and the record says what the primary saw of it."""
    plan = howfast.plan(EVENT_STEP.format(clients=2, duration="9s"))
    out = howfast("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                  "--sync", "on", "--event", "2s:crash", "--event", "4s:failover",
                  "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    step = _event_step(doc)
    assert step["status"] == "completed", step["error"]
    crash, failover = step["events"]  # type: ignore[misc]
    print(f"{crash['line']}\n{failover['line']}")
    assert crash["verified"] is True and failover["verified"] is True
    assert failover["applied_s"] >= crash["back_s"]
    for event in (crash, failover):
        assert event["lost_commits"] == 0, event["line"]
    assert "when promoted" not in failover["line"]
    store = open_store(str(howfast.store), reading=True)
    run = store.get_run(doc["id"])
    assert run is not None
    (stored,) = [s for s in run.steps if s.workload == "pgbench" and s.status == "completed"]
    marks = marks_from_section(stored.sections["events"])  # type: ignore[arg-type]
    assert float(str(marks[0].facts["standbys_streaming_s"])) > 0
    seen = marks[1].facts["standby_before"]
    assert isinstance(seen, dict)
    assert (seen["state"], seen["sync_state"]) == ("streaming", "sync"), seen
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []


@pytest.mark.emulated  # its standbys on 5 ms volumes (nbdkit, nbdfuse, loop devices)
def test_failover_with_sync_off_counts_its_loss_and_the_next_step_fails_over_again(
    howfast: Howfast, target_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asynchronous: the loss is counted, not assumed: the figure is the window's acknowledged
    commits minus the rows the new primary holds for it (1 proven lost, 1 in doubt, measured
    with the 5 ms standby volume). Before the next step the design is rebuilt (standby_1 made
    again from the promoted server, on a new standby volume, asynchronous as asked), and that
    step's own failover promotes the rebuilt standby."""
    plan = howfast.plan(TWO_STEPS)
    # The standby on a volume 5 ms slower (when this machine can emulate one), so that
    # its WAL may lag at the kill, as a remote node's would.
    slower = ["--standby-latency", "5ms"] if available().name is not None else []
    out = howfast("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                  "--sync", "off", *slower, "--event", "4s:failover", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    step = _event_step(doc)
    assert step["status"] == "completed", step["error"]
    (event,) = step["events"]  # type: ignore[misc]
    print(f"sync off: {event['line']}; in doubt {event['in_doubt']}")
    assert event["verified"] is True, event["problem"]
    (later,) = [s for s in doc["steps"] if s["workload"] == "pgbench" and s is not step]
    assert later["status"] == "completed", later["error"]
    restored = later["resolved"]["design_restored"]
    print(f"rebuilt: {restored}")
    assert restored["primary"] == "standby_1" and restored["standby_sync_state"] == "async"
    assert restored["standby_location"] != restored["primary_location"]
    if slower:  # the rebuilt standby on a volume of its own, as the design puts a standby
        assert "/howfast-vol-" in restored["standby_location"]
    (again,) = later["events"]
    assert again["verified"] is True, again["problem"]
    assert again["evidence"]["promoted"] == "standby_1"
    assert again["evidence"]["timeline_after"] > event["evidence"]["timeline_after"]
    # The figure is the count: acknowledged before the cut minus the rows found for it.
    store = open_store(str(howfast.store), reading=True)
    run = store.get_run(doc["id"])
    assert run is not None
    stored = next(s for s in run.steps if s.workload == "pgbench" and s.status == "completed")
    load = LoadRecord.from_document(stored.sections["load"])  # type: ignore[arg-type]
    marks = marks_from_section(stored.sections["events"])  # type: ignore[arg-type]
    window = figures.commit_windows(marks, load)[0]
    assert window[0] is None and window[1] is not None  # before the failover's cut
    (count,) = [h for h in load.history if h.lo_s is None and h.hi_s == pytest.approx(window[1])]
    lost = figures.lost_in_window(load, window, count.rows)
    assert lost.acked > 0
    assert event["lost_commits"] == max(0, lost.acked - count.rows) == lost.lost
    assert event["lost_commits_max"] == lost.lost_max
    # what the primary saw of the standby before it died is in the record
    seen = marks[0].facts["standby_before"]
    assert isinstance(seen, dict) and seen["sync_state"] == "async", seen
    # results show says on which server the later step ran (wide enough for one line)
    monkeypatch.setenv("COLUMNS", "400")
    shown = howfast("results", "show", str(doc["id"]))
    assert shown.returncode == 0, shown.stderr
    assert "ran on standby_1, promoted by a failover; the design rebuilt" in shown.stdout
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []
    mounts = Path("/proc/self/mounts").read_text()
    assert str(target_dir) not in mounts  # the standby's emulated volume too


# A failover in the first pgbench step only; the second measures the design rebuilt.
FAILOVER_THEN_QUIET = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2]
duration = "5s"
latency_log = "full"
events = ["2s:failover"]
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "{duration}"
latency_log = "full"
"""


def test_the_design_is_rebuilt_after_a_failover_and_the_next_step_measures_it(
    howfast: Howfast, target_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the steps the killed primary's directory (and shared memory) go, standby_1 is
    made again from the promoted server by base backup and is synchronous again: the next
    step commits through it (replication figures, a SyncRep share), runs on the promoted
    server, and says so (`resolved.design_restored`, results show). Nothing is left."""
    plan = howfast.plan(FAILOVER_THEN_QUIET.format(duration="5s"))
    before = set(_cgroups("standby-"))
    out, shm_left = howfast.in_private_shm(
        "run", str(plan), "--target", str(target_dir), "--replicas", "1", "--sync", "on",
        "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    first, second = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    assert first["status"] == "completed", first["error"]
    assert second["status"] == "completed", second["error"]
    (event,) = first["events"]
    assert event["verified"] is True and event["lost_commits"] == 0, event["line"]
    assert not second.get("events")
    restored = second["resolved"]["design_restored"]
    print(f"rebuilt: {restored}")
    assert restored["primary"] == "standby_1" and restored["standby"] == "standby_1"
    assert restored["standby_sync_state"] == "sync"
    assert restored["seconds"] >= restored["base_backup_s"] > 0
    (cluster,) = {
        Path(restored["primary_location"]).parent,
        Path(restored["standby_location"]).parent,
    }
    assert restored["old_primary_removed"] == str(cluster / "data")
    assert restored["primary_location"] == str(cluster / "standby_1")
    assert restored["standby_location"] == str(cluster / "standby_1-rebuilt-1")
    assert "design_restored" not in first["resolved"]
    m = second["metrics"]
    print(f"after the rebuild: tps {m['tps']:.0f}, SyncRep share {m['wait_syncrep_share']}, "
          f"flush lag p50 {m['replication_flush_lag_p50_ms']} ms")  # fmt: skip
    standby = second["postgres"]["replication"]["standbys"]["standby_1"]
    assert standby["state"] == "streaming" and standby["sync_state"] == "sync"
    assert m["replication_flush_lag_p50_ms"] > 0 and m["replication_sent_bytes"] > 0
    assert 0 < m["wait_syncrep_share"] <= 1
    # the server's own writes are the promoted server's, the standby's the rebuilt one's
    assert m["pg_write_bytes"] > 0 and m["standby_write_bytes"] > 0
    assert second["io"]["roles"]["standby_1"]["path"] == restored["standby_location"] + "/data"
    assert not [w for w in second["warnings"] if w.startswith("sampler ")], second["warnings"]
    monkeypatch.setenv("COLUMNS", "400")
    shown = howfast("results", "show", str(doc["id"]))
    assert shown.returncode == 0, shown.stderr
    assert "ran on standby_1, promoted by a failover" in shown.stdout, shown.stdout
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []
    assert _cgroups(cluster.name.removeprefix("howfast-")) == []
    # the standbys' cgroups (the promoted one's, the rebuilt one's) are gone; others' runs on
    # this machine may have theirs meanwhile, owned by their still running howfast
    assert _left_for_good(before) == []
    assert shm_left == []


def test_ctrl_c_while_the_design_is_rebuilt_leaves_nothing(
    howfast: Howfast, target_dir: Path
) -> None:
    """SIGINT while the new standby is being made between the steps: the promoted server is
    held (SIGSTOP, by the test) as soon as the rebuilt standby's directory appears, so the
    base backup waits on it; SIGINT then, the server let go a second later. howfast ends
    with 130 and leaves no process, directory, cgroup or shared memory."""
    plan = howfast.plan(FAILOVER_THEN_QUIET.format(duration="5s"))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                         "--sync", "on")  # fmt: skip
    wait_for(proc, "pgbench tpcb-like")
    (primary,) = target_dir.glob("howfast-*/data")
    cluster = primary.parent
    token = cluster.name.removeprefix("howfast-")
    shared = shared_memory_of(int((primary / "postmaster.pid").read_text().split()[0]))
    promoted = cluster / "standby_1" / "data"
    shared |= shared_memory_of(int((promoted / "postmaster.pid").read_text().split()[0]))
    rebuilt = cluster / "standby_1-rebuilt-1"
    deadline = time.monotonic() + 120
    while not rebuilt.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rebuilt.exists(), "the design was not rebuilt"
    postmaster = int((promoted / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, signal.SIGSTOP)
    try:
        # pg_basebackup is started a moment after its directory is made: a moment that a
        # loaded machine can stretch past any fixed sleep, so it is waited for (it then hangs
        # on the stopped server, under way)
        began = time.monotonic()
        while not _base_backups_into(rebuilt) and time.monotonic() - began < 30:
            time.sleep(0.05)
        assert _base_backups_into(rebuilt), "no pg_basebackup under way"
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
    finally:
        os.kill(postmaster, signal.SIGCONT)
    _, err = stop_howfast(proc)
    assert proc.returncode == 130, err[-2000:]
    assert _base_backups_into(rebuilt) == []
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []
    assert _cgroups(token) == []
    assert postgres_shared_memory() & shared == set()


def test_a_rebuild_that_fails_skips_the_later_steps_with_its_reason(
    howfast: Howfast, target_dir: Path
) -> None:
    """The rebuilt standby's directory cannot be made (the test puts a file there while the
    failover step runs): the next step is skipped with the reason, and nothing is left."""
    plan = howfast.plan(FAILOVER_THEN_QUIET.format(duration="5s"))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                         "--json")  # fmt: skip
    wait_for(proc, "2s:failover applied")
    (cluster,) = target_dir.glob("howfast-*")
    (cluster / "standby_1-rebuilt-1").write_text("in the way\n")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    first, second = [s for s in json.loads(out)["steps"] if s["workload"] == "pgbench"]
    assert first["status"] == "completed", first["error"]
    assert second["status"] == "skipped"
    assert "not run: " in second["error"] and "standby_1-rebuilt-1" in second["error"]
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []


def test_a_killed_run_after_a_rebuild_in_a_standby_dir_is_cleaned_up(
    howfast: Howfast, target_dir: Path
) -> None:
    """SIGKILL of howfast while a step runs on the rebuilt design, the standbys in a
    --standby-dir: `howfast cleanup --yes` finds and removes the promoted server and the
    rebuilt standby (their howfast-<token> directories, cgroups), as at start."""
    other = target_dir.parent / "standbys"
    other.mkdir()
    other.chmod(0o755)
    plan = howfast.plan(FAILOVER_THEN_QUIET.format(duration="60s"))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                         "--standby-dir", str(other))  # fmt: skip
    wait_for(proc, "[3/3] pgbench")  # after the rebuild
    servers = sorted(other.glob("howfast-*/data"))
    assert len(servers) == 2 and all(postgres_pids_under(d) for d in servers)
    assert not list(target_dir.glob("howfast-*/data"))  # the killed primary's, removed
    proc.kill()
    proc.communicate(timeout=30)
    for directory in (target_dir, other):
        out = howfast("cleanup", "--target", str(directory), "--yes")
        assert out.returncode == 0, out.stderr[-2000:]
    assert postgres_pids_under(target_dir) == [] and postgres_pids_under(other) == []
    assert list(target_dir.iterdir()) == [] and list(other.iterdir()) == []


@pytest.mark.emulated  # nbdkit, nbdfuse and a loop device: with the other such tests
def test_the_design_is_rebuilt_on_an_emulated_volume(howfast: Howfast, target_dir: Path) -> None:
    """An emulated target: the standbys live in the cluster on the volume, and so does the
    rebuilt one; the next step streams synchronously; the volume is taken down at the end."""
    if available().name is None:
        pytest.skip(f"no emulated volumes here: {available().reason}")
    plan = howfast.plan(FAILOVER_THEN_QUIET.format(duration="4s"))
    out = howfast("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                  "--sync", "on", "--storage-latency", "0ms", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    first, second = [s for s in json.loads(out.stdout)["steps"] if s["workload"] == "pgbench"]
    assert first["status"] == second["status"] == "completed", (first["error"], second["error"])
    restored = second["resolved"]["design_restored"]
    print(f"rebuilt on the volume: {restored['seconds']} s")
    assert restored["standby_sync_state"] == "sync"
    assert (
        "/howfast-vol-" in restored["standby_location"] and "/mnt/" in restored["standby_location"]
    )
    standby = second["postgres"]["replication"]["standbys"]["standby_1"]
    assert standby["state"] == "streaming" and standby["sync_state"] == "sync"
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []
    assert str(target_dir) not in Path("/proc/self/mounts").read_text()


@pytest.mark.emulated  # nbdkit, nbdfuse and a loop device: with the other such tests
def test_ctrl_c_after_a_failover_on_an_emulated_volume_leaves_nothing(
    howfast: Howfast, target_dir: Path
) -> None:
    """SIGINT while the load runs on the promoted standby of an emulated target: the old
    primary's directory, the new primary and its directory, the volume, all gone; exit 130."""
    if available().name is None:
        pytest.skip(f"no emulated volumes here: {available().reason}")
    plan = howfast.plan(TWO_STEPS.replace('"10s"', '"30s"'))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                         "--storage-latency", "0ms", "--event", "3s:failover")  # fmt: skip
    wait_for(proc, "3s:failover applied")
    (standby,) = target_dir.glob("howfast-*/**/standby_1/data")
    assert postgres_pids_under(standby)  # the new primary serves the load
    _, err = stop_howfast(proc)
    assert proc.returncode == 130, err[-2000:]
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []


def test_ctrl_c_while_the_failover_is_being_applied_leaves_nothing(
    howfast: Howfast, target_dir: Path
) -> None:
    """SIGINT while `pg_ctl promote -w` waits: the standby's postmaster is held (SIGSTOP, by
    the test, once the load runs) so that the failover stays under way after the primary was
    killed; SIGINT then, the standby let go a second later. howfast ends with 130 and leaves
    no process, directory, cgroup."""
    plan = howfast.plan(EVENT_STEP.format(clients=1, duration="20s"))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                         "--event", "4s:failover")  # fmt: skip
    wait_for(proc, "pgbench tpcb-like")
    (standby,) = target_dir.glob("howfast-*/**/standby_1/data")
    (primary,) = target_dir.glob("howfast-*/data")
    token = primary.parent.name.removeprefix("howfast-")
    postmaster = int((standby / "postmaster.pid").read_text().split()[0])
    old_primary = int((primary / "postmaster.pid").read_text().split()[0])
    shared = shared_memory_of(postmaster) | shared_memory_of(old_primary)
    os.kill(postmaster, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 60
        while postgres_pids_under(primary) and time.monotonic() < deadline:
            time.sleep(0.05)  # the failover killed the primary: it now waits for the promotion
        assert not postgres_pids_under(primary), "the failover did not start"
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
    finally:
        os.kill(postmaster, signal.SIGCONT)
    _, err = stop_howfast(proc)
    # the SIGINT came while the failover was under way: it was applied, then all stopped
    assert "4s:failover applied" in err, err[-2000:]
    assert proc.returncode == 130, err[-2000:]
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []
    assert _cgroups(token) == []
    assert postgres_shared_memory() & shared == set()  # the killed primary's too
