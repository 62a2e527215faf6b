"""Events during a pgbench step on a real local target (PostgreSQL, fsync on, the postgres OS
user): the events layer restarts and crashes the server while the surviving load runs, and the
step stores what happened: each event verified, the outage, the load resumed, and every commit
pgbench acknowledged still in pgbench_history (docs/events.md)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from howfast.analysis import events as figures
from howfast.analysis.loadrecord import LoadRecord
from howfast.event_marks import marks_from_section
from howfast.events.base import EventContext
from howfast.events.registry import actions
from howfast.events.schedule import EventSchedule
from howfast.machine.pgbin import choose_install
from howfast.model import JSONValue
from howfast.plugin.events import parse_event
from howfast.store import open_store
from howfast.targets.base import Connection
from howfast.targets.emulated.build import Limits
from howfast.targets.emulated.target import EmulatedTarget
from howfast.targets.emulated.volume import available
from howfast.targets.local import LocalTarget
from howfast.workloads.base import StepContext
from howfast.workloads.pgbench import survive_step
from tests.integration.conftest import (
    QUICK_WITHOUT_FIO,
    Howfast,
    postgres_pids_under,
    stop_howfast,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def started(target_dir: Path) -> Iterator[tuple[LocalTarget, Connection]]:
    if os.geteuid() != 0:
        pytest.skip("needs root: the server runs as its own OS user")
    target = LocalTarget(target_dir, choose_install(), settings={"shared_buffers": "32MB"})
    try:
        conn = target.start()
        pgbench = target.install.program("pgbench")
        assert pgbench is not None
        subprocess.run([str(pgbench), "-i", "-q", "-s", "2", *conn.pgbench_args()],
                       check=True, capture_output=True)  # fmt: skip
        yield target, conn
    finally:
        target.stop()
    assert postgres_pids_under(target_dir) == []


Served = LocalTarget | EmulatedTarget


def step(
    target: Served, conn: Connection, work: Path, texts: list[str], duration_s: int,
    clients: int = 2,
) -> tuple[survive_step.StepOutcome, EventSchedule]:  # fmt: skip
    specs = [parse_event(t) for t in texts]
    schedule = EventSchedule(
        lambda now: EventContext(target, now, lambda: conn, work / "events", float(duration_s)),
        specs,
        actions(),
    )
    ctx = StepContext(target=target, connection=conn, install=target.install, work_dir=work,
                      host=target.host())  # fmt: skip
    params: dict[str, JSONValue] = {
        "mode": "tpcb-like",
        "clients": clients,
        "duration_s": duration_s,
        "events": [s.text for s in specs],
        "segment": 5,
    }
    program = target.install.program("pgbench")
    assert program is not None
    outcome = survive_step.execute(ctx, params, schedule, program=str(program), jobs=clients,
                                   progress=True)  # fmt: skip
    return outcome, schedule


def test_a_restart_and_a_crash_during_the_load_are_verified_and_lose_no_commit(
    started: tuple[LocalTarget, Connection], tmp_path: Path
):
    target, conn = started
    # 16 s: 9 s after the crash for recovery, reconnecting and commits. With 12 s, a fresh
    # machine beside the lab's start and two busy loops had the server back only at 11.0 s
    # (4 s of recovery), and the step's last second held no commit.
    outcome, _ = step(target, conn, tmp_path, ["3s:restart", "7s:crash"], 16)
    assert outcome.status == "completed", outcome.error
    marks = marks_from_section(outcome.sections["events"])
    assert [m.action for m in marks] == ["restart", "crash"]
    for mark in marks:
        assert mark.verified is True, mark.problem
        assert mark.applied_s is not None and mark.back_s is not None
        assert mark.back_s > mark.applied_s >= mark.at_s
        assert mark.evidence["pid_after"] != mark.evidence["pid_before"]
    assert marks[0].evidence["log_line"] and "shut down at" in str(marks[0].evidence["log_line"])
    assert "redo_s" in marks[1].evidence or "not properly shut down" in str(
        marks[1].evidence["log_line"]
    )
    load = LoadRecord.from_document(outcome.sections["load"])
    restart, crash = figures.figures(marks, load, outcome.histograms)
    for fig in (restart, crash):
        assert fig.downtime_s is not None and fig.downtime_s > 0
        assert fig.lost is not None and fig.lost.lost == 0, figures.event_line(fig)
        assert fig.lost.in_doubt <= 2
    assert restart.tps_before and restart.tps_after and restart.p99_before_ms
    assert outcome.metrics["transactions"] == load.acked > 0
    assert (
        0
        < float(str(outcome.metrics["latency_avg_ms"]))
        < float(str(outcome.metrics["latency_max_ms"]))
    )
    assert outcome.metrics["load_segments"] >= 4  # 5 s segments, two cut short
    # the load went on after the crash: commits once the server was back (not "in the last
    # two seconds": beside a busy machine's load, recovery and reconnecting left one of them
    # without a commit)
    tps = {s.t: s.value for s in outcome.series["tps"]}
    back_s = marks[1].back_s
    assert any(v > 0 for t, v in tps.items() if t > back_s), (back_s, tps)
    assert target.alive()


def test_a_command_that_fails_is_recorded_unverified_and_a_checkpoint_verified(
    started: tuple[LocalTarget, Connection], tmp_path: Path
):
    target, conn = started
    outcome, _ = step(target, conn, tmp_path, ["1s:checkpoint", "2s:exec=false"], 4)
    assert outcome.status == "completed", outcome.error
    checkpoint, command = marks_from_section(outcome.sections["events"])
    assert checkpoint.verified is True
    assert int(str(checkpoint.evidence["requested_after"])) > int(
        str(checkpoint.evidence["requested_before"])
    )
    assert command.verified is False and command.problem == "false exited with status 1"
    assert any("2s:exec=false was not verified" in w for w in outcome.warnings)
    load = LoadRecord.from_document(outcome.sections["load"])
    fig = figures.figures([checkpoint], load, outcome.histograms)[0]
    # the service stays: at most a stall of the commits while the checkpoint flushes (a gap
    # counts from 20 ms; measured 0 and 0.02 s on this machine)
    assert fig.downtime_s is not None and fig.downtime_s < 0.5
    assert fig.lost is not None and fig.lost.lost == 0


def test_an_iops_cap_for_a_while_slows_the_commits_and_is_lifted_after(
    started: tuple[LocalTarget, Connection], tmp_path: Path
):
    target, conn = started
    if target.cgroups.io_account is None:
        pytest.skip(f"no I/O cgroup here: {target.cgroups.io_account_note}")
    outcome, _ = step(target, conn, tmp_path, ["4s:cap-iops=20,for=4s"], 12, clients=1)
    assert outcome.status == "completed", outcome.error
    (mark,) = marks_from_section(outcome.sections["events"])
    assert mark.verified is True, (mark.problem, mark.evidence)
    assert mark.undone_s is not None and 7.9 < mark.undone_s < 9
    assert mark.facts["lines"] and mark.facts["undo"]["lifted"]  # type: ignore[index]
    # the server's own IOPS under the cap were measured (from the cgroup's counters)
    measured = mark.evidence["server_iops_after_cap"]
    assert isinstance(measured, float) and measured <= 1.2 * 20, mark.evidence
    load = LoadRecord.from_document(outcome.sections["load"])
    (fig,) = figures.figures([mark], load, outcome.histograms)
    assert fig.tps_before and fig.tps_during is not None
    # One client: each transaction waits at least two more 5 ms delays (a WAL write and its
    # flush) in the window, so its TPS falls to t / (t + 10) of a t-ms transaction's. Under
    # load t grows (flushes alone took 17 ms in a CI run: 0.7 would fail from t = 23 ms), so
    # the fall is asserted with room for t up to about 55 ms: the per-transaction check below
    # is the sharp one, on medians that a loaded machine moves less than the TPS of windows
    # 3-4 s long.
    assert fig.tps_during < 0.85 * fig.tps_before, figures.event_line(fig)
    # lifted: the commits speed up again (back to 90% of before may take longer than the
    # step's last seconds on a loaded machine: recovery_s is then absent, with its reason)
    lifted = load.tps(mark.undone_s + 1, load.end_s)
    assert lifted is not None and lifted > 3 * fig.tps_during, (lifted, figures.event_line(fig))
    # lifted: the cgroup holds no IOPS rule of ours any more
    rules = Path(str(mark.facts["cgroup"]))
    for name in ("blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device", "io.max"):
        if (rules / name).exists():
            assert "20" not in (rules / name).read_text().split()


@pytest.fixture
def emulated(target_dir: Path) -> Iterator[tuple[EmulatedTarget, Connection]]:
    if os.geteuid() != 0 or available().name is None:
        pytest.skip(f"no emulated volumes here: {available().reason}")
    target = EmulatedTarget(
        target_dir,
        choose_install(),
        Limits(latency_ms=0.0),
        size_bytes=512 * 2**20,
        settings={"shared_buffers": "32MB"},
    )
    try:
        target.check(will_init=True)
        conn = target.start()
        pgbench = target.install.program("pgbench")
        assert pgbench is not None
        subprocess.run([str(pgbench), "-i", "-q", "-s", "1", *conn.pgbench_args()],
                       check=True, capture_output=True)  # fmt: skip
        yield target, conn
    finally:
        target.stop()
    assert postgres_pids_under(target_dir) == []
    assert not any(
        str(target_dir) in line for line in Path("/proc/self/mounts").read_text().splitlines()
    )


@pytest.mark.emulated
def test_slower_storage_for_a_while_slows_the_commits_and_the_latency_comes_back(
    emulated: tuple[EmulatedTarget, Connection], tmp_path: Path
):
    target, conn = emulated
    # +20 ms, not +5: the event is verified by the shortest of nine flushes before and after
    # (events/slow_storage.py), and on a busy machine every flush before it already took
    # 7.3 ms while the shortest after +5 ms took 6.4 ms (CI-like run, 2026-11-30): a change of
    # +5 ms was within what the load adds to a flush, and the event said it could not verify
    # it. Half of +20 ms stands clear of that.
    outcome, _ = step(target, conn, tmp_path, ["3s:slow-storage=20ms,for=4s"], 10, clients=1)
    assert outcome.status == "completed", outcome.error
    (mark,) = marks_from_section(outcome.sections["events"])
    assert mark.verified is True, (mark.problem, mark.evidence)
    # Ended at the window's end (7 s), not at the load's (10 s, where an event without for= is
    # restored): undone_s is when the undo began (window_ends_as_undo_begins), before it timed
    # flushes after restoring; the bound leaves a loaded machine 1 s to wake the schedule.
    assert mark.undone_s is not None and 6.9 < mark.undone_s < 8, mark.undone_s
    undo = mark.facts["undo"]
    assert isinstance(undo, dict) and undo["restored_ms"] == 0.0
    # the latency came back: a flush after the window is close to one before it
    assert float(undo["flush_ms_after"]) < float(str(mark.facts["flush_ms_before"])) + 2.5
    assert target.added_latency_ms() == 0.0
    load = LoadRecord.from_document(outcome.sections["load"])
    (fig,) = figures.figures([mark], load, outcome.histograms)
    assert fig.tps_before and fig.tps_during is not None
    # One client: each transaction waits at least two more 20 ms delays (a WAL write and its
    # flush) in the window, so its TPS falls to t / (t + 40) of a t-ms transaction's. Under
    # load t grows (flushes alone took 17 ms in a CI run), and the "during" window also holds
    # the undo's own flush timing after the latency was restored (above), so the fall is
    # asserted with room for t up to about 200 ms: the per-transaction check below is the
    # sharp one, on medians that a loaded machine moves less than the TPS of windows 3-4 s
    # long.
    assert fig.tps_during < 0.85 * fig.tps_before, figures.event_line(fig)
    assert fig.p99_during_ms is not None and fig.p99_before_ms is not None
    # A commit waits a delayed write and flush: every transaction of the one client is 20 ms
    # slower or more in the window. Said of the medians: the p99s carry the loaded machine's
    # scheduling stalls (CI-like run: 20.4 ms before the window, 23.2 ms in it).
    before = _median_ms(outcome.histograms[f"latency_us:event{mark.index}:before"])
    during = _median_ms(outcome.histograms[f"latency_us:event{mark.index}:during"])
    assert during > before + 16, (before, during)
    assert fig.p99_during_ms > 20


def _median_ms(histogram: dict[int, int]) -> float:
    """The nearest-rank median of a {µs: count} histogram, in ms."""
    rank = (sum(histogram.values()) + 1) // 2
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= rank:
            return value / 1000
    raise AssertionError("an empty histogram")


# --- through howfast run -----------------------------------------------------------------------


def test_run_quick_with_a_restart_and_a_crash_lists_both_events_with_their_figures(
    howfast: Howfast, target_dir: Path
):
    """The issue's done-when: the step lists both events, verified, with downtime and 0
    commits lost; results show prints the table and the lines; the report marks them."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the server runs as its own OS user")
    # --scale 1: quick's scale 10 (150 MB to load) says nothing more about the events; nor
    # does quick's fio probe (QUICK_WITHOUT_FIO)
    quick = str(howfast.plan(QUICK_WITHOUT_FIO, "quick.toml"))
    out = howfast("run", quick, "--target", str(target_dir), "--clients", "2",
                  "--modes", "tpcb-like", "--duration", "10s", "--event", "3s:restart",
                  "--event", "7s:crash", "--scale", "1", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    (step,) = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    assert step["status"] == "completed", step["error"]
    assert step["params"]["events"] == ["3s:restart", "7s:crash"]
    restart, crash = step["events"]
    for event in (restart, crash):
        assert event["verified"] is True, event["problem"]
        assert event["downtime_s"] > 0
        assert event["lost_commits"] == 0 and event["in_doubt"] <= 2
        assert event["recovery_s"] is not None or event["recovery_note"]
        assert event["line"].startswith(f"{event['action']} at ")
    assert "not properly shut down" in (crash["evidence"]["log_line"] or "")
    # stored p99s, read back without the histograms: after the restart, before the crash
    assert restart["p99_after_ms"] is not None and crash["p99_before_ms"] is not None
    # the live line gives the second the restart began (after the schedule's wake-up and
    # the read of the server's identity: a loaded machine can make that past 3.5 s); it
    # names the target first, and wraps at the terminal's width
    assert 3 <= restart["applied_s"] < 5, restart
    applied = f"{restart['applied_s']:.0f} s: 3s:restart applied (verified)"
    assert applied in " ".join(out.stderr.split()), out.stderr
    report = target_dir.parent / "r.md"
    shown, made = howfast.together(
        ["results", "show", str(doc["id"])], ["report", str(doc["id"]), "--output", str(report)]
    )
    assert shown.returncode == 0, shown.stderr
    assert "Events" in shown.stdout and "3s:restart" in shown.stdout
    assert "restart at 3 s:" in shown.stdout and "0 commits lost" in shown.stdout
    assert made.returncode == 0, made.stderr
    text = report.read_text()
    assert "## Events during steps" in text and "| 7s:crash |" in text.replace("  ", " ")
    assert "crash at 7 s:" in text
    assert postgres_pids_under(target_dir) == []


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ("5s:failover", "failover needs standbys to promote (--replicas N)"),
        (
            "5s:slow-storage=5ms",
            "slow-storage changes an emulated volume's latency: give --storage-latency",
        ),
        ("30s:restart", "event 30s:restart is past the end of a 10 s step"),
        ("5s:move", "move needs a server in a pod howfast created (a k8s:// target)"),
        (
            "5s:exec=no-such-howfast-command",
            "no-such-howfast-command is not an executable command here",
        ),
    ],
)
def test_an_event_a_target_cannot_take_is_refused_before_anything(
    howfast: Howfast, target_dir: Path, event: str, reason: str
):
    out = howfast("run", "quick", "--target", str(target_dir), "--duration", "10s",
                  "--event", event)  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert reason in out.stderr
    assert list(target_dir.iterdir()) == []  # nothing created


def test_ctrl_c_during_a_restart_leaves_nothing_running(howfast: Howfast, target_dir: Path):
    if os.geteuid() != 0:
        pytest.skip("needs root: the server runs as its own OS user")
    quick = str(howfast.plan(QUICK_WITHOUT_FIO, "quick.toml"))  # Ctrl-C during the load
    proc = howfast.popen("run", quick, "--target", str(target_dir), "--clients", "1",
                         "--modes", "tpcb-like", "--duration", "20s", "--event", "2s:restart",
                         "--event", "3s:cap-iops=10,for=10s", "--scale", "1")  # fmt: skip
    wait_for(proc, "3s:cap-iops=10,for=10s applied")
    (cluster,) = target_dir.glob("howfast-*")  # howfast-TOKEN: names its cgroups too
    _, err = stop_howfast(proc)
    assert proc.returncode == 130, err[-2000:]
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []
    token = cluster.name.removeprefix("howfast-")
    assert not [p for p in Path("/sys/fs/cgroup").glob(f"*/howfast-io-{token}*")]


def test_the_dry_run_shows_the_load_in_segments(howfast: Howfast, target_dir: Path):
    out = howfast("run", "quick", "--target", str(target_dir), "--modes", "tpcb-like",
                  "--duration", "10s", "--event", "3s:restart", "--dry-run")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "with events (3s:restart): pgbench runs in back-to-back segments" in out.stdout
    assert " -T 10 -n -b tpcb-like " in out.stdout
    assert list(target_dir.iterdir()) == []


def test_the_postgresql_samplers_reconnect_after_a_restart_and_go_on_sampling(
    howfast: Howfast, target_dir: Path
):
    """Samplers through events (docs/samplers.md): the restart cuts the wait-event,
    replication and statistics samplers' connections; each reconnects and samples again after
    the event, with no sampler warning. Sampler time starts before the load: a sample at t is
    at load time t - offset, offset <= sampled_s - the load's end, hence the bound below."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the server runs as its own OS user")
    plan = howfast.plan(
        '[[steps]]\nworkload = "pgbench-init"\nscale = 1\n'
        '[[steps]]\nworkload = "pgbench"\nmodes = ["tpcb-like"]\nclients = [2]\n'
        'duration = "10s"\nlatency_log = "full"\n'  # every transaction: no calibration first
    )
    out = howfast("run", str(plan), "--target", str(target_dir), "--replicas", "1",
                  "--event", "2s:restart", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    (step,) = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    assert step["status"] == "completed", step["error"]
    assert not [w for w in step["warnings"] if w.startswith("sampler ")], step["warnings"]
    (event,) = step["events"]
    assert event["verified"] is True, event["problem"]
    postgres = step["postgres"]
    waits, replication = postgres["wait_sampling"], postgres["replication"]
    for section in (waits, replication, postgres["stats_sampling"]):
        assert section["reconnects"] >= 1, section  # a restart ends every session
    assert waits["missed_readings"] >= 1  # 10 Hz: at least one reading fell in the outage
    store = open_store(str(howfast.store), reading=True)
    run = store.get_run(doc["id"], with_series=True)
    assert run is not None
    (stored,) = [s for s in run.steps if s.workload == "pgbench"]
    load = LoadRecord.from_document(stored.sections["load"])  # type: ignore[arg-type]
    sampled_s = float(stored.sections["io"]["sampled_s"])  # type: ignore[arg-type]
    after = float(event["back_s"]) + (sampled_s - load.end_s)
    print(f"back at {event['back_s']:.2f} s (load), samples after {after:.2f} s (sampler)")
    for name in ("waits.samples", "replication.standby_1.sent_bytes_per_s", "pg.commits_per_s"):
        later = [p for p in stored.series[name] if p.t > after]
        assert later, (name, [p.t for p in stored.series[name]])
    # After the restart the sessions sampled are the load's again: active ones were seen.
    # `after` is an upper bound of the outage's end in sampler time; on a loaded machine it
    # can fall past the load's end. The outage itself is the widest gap of the 10 Hz
    # readings before that bound: its end is where the sampler had reconnected.
    readings = [p.t for p in stored.series["waits.samples"] if p.t <= after]
    gaps = [(later - earlier, later) for earlier, later in itertools.pairwise(readings)]
    reconnected = max(gaps)[1] if gaps else after
    active = [
        p.value
        for name, points in stored.series.items()
        if name.startswith("waits.") and name != "waits.samples"
        for p in points
        if p.t >= reconnected
    ]
    assert sum(active) > 0, (reconnected, after)
    assert postgres_pids_under(target_dir) == []
