"""The events schedule (events/schedule.py), the registry and the checks before a run. The
actions here are the test's own, recording what the schedule asks of them: what is tested is
the schedule's order, timing, failure and undo rules (the real actions run on a real server in
tests/integration/test_events.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from howfast.errors import HowfastError
from howfast.events import checks
from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.events.registry import actions
from howfast.events.schedule import EventSchedule
from howfast.eventspec import EventSpec
from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue
from howfast.plugin.events import action_syntaxes, parse_event
from howfast.targets.dsn import DsnTarget
from howfast.targets.local import LocalOptions, LocalTarget


class Recorder(EventAction):
    """Applies by noting the time; fails when its spec's arg says so."""

    def __init__(self, name: str, log: list[tuple[str, float]], took_s: float = 0.0) -> None:
        self.name = name  # type: ignore[misc]
        self.log = log
        self.took_s = took_s

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        began = ctx.now()
        self.log.append((f"apply {spec.text}", began))
        if spec.arg == "99":
            raise HowfastError("it broke")
        time.sleep(self.took_s)

        def undo() -> Mapping[str, JSONValue]:
            self.log.append((f"undo {spec.text}", ctx.now()))
            return {"restored": True}

        return Applied(began, ctx.now(), facts={"n": 1}, undo=undo if spec.for_s else None)

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        return Verified(True, {"seen": spec.text})


def schedule(specs: list[str], log: list[tuple[str, float]], took_s: float = 0.0) -> EventSchedule:
    acts: dict[str, EventAction] = {
        name: Recorder(name, log, took_s) for name in ("checkpoint", "restart", "cap-iops")
    }
    return EventSchedule(
        lambda now: EventContext(None, now, lambda: None, Path("/nonexistent"), 10.0),  # type: ignore[arg-type]
        [parse_event(t) for t in specs],
        acts,
    )


def test_events_apply_at_their_times_in_order_and_windows_are_undone_at_their_end():
    log: list[tuple[str, float]] = []
    s = schedule(["0.4s:cap-iops=10,for=0.4s", "0.2s:checkpoint", "0.6s:restart"], log)
    s.start(time.time())
    time.sleep(1.2)
    marks = s.finish(5)
    assert [what for what, _ in log] == [
        "apply 0.2s:checkpoint",
        "apply 0.4s:cap-iops=10,for=0.4s",
        "apply 0.6s:restart",
        "undo 0.4s:cap-iops=10,for=0.4s",
    ]
    for (_, t), want in zip(log, (0.2, 0.4, 0.6, 0.8), strict=True):
        assert want <= t < want + 0.15
    by_text = {m.text: m for m in marks}
    assert [m.index for m in marks] == [1, 2, 3]  # in time order
    capped = by_text["0.4s:cap-iops=10,for=0.4s"]
    assert capped.verified is True and capped.undone_s is not None and capped.undone_s >= 0.8
    assert capped.facts["undo"] == {"restored": True} and "undone_early" not in capped.facts
    assert by_text["0.6s:restart"].evidence == {"seen": "0.6s:restart"}


class CheckingUndo(Recorder):
    """An undo that restores at once, then spends 0.4 s checking its work (as slow-storage's
    timing of flushes after restoring)."""

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        applied = super().apply(ctx, spec)

        def undo() -> Mapping[str, JSONValue]:
            self.log.append((f"undo {spec.text}", ctx.now()))
            time.sleep(0.4)
            return {"checked": True}

        return Applied(applied.applied_s, applied.back_s, facts=applied.facts, undo=undo)


@pytest.mark.parametrize("ends_as_undo_begins", [False, True])
def test_a_window_ends_when_its_undo_returns_or_as_it_begins_as_the_action_declares(
    ends_as_undo_begins: bool,
):
    log: list[tuple[str, float]] = []
    action = CheckingUndo("cap-iops", log)
    action.window_ends_as_undo_begins = ends_as_undo_begins  # type: ignore[misc]
    s = EventSchedule(
        lambda now: EventContext(None, now, lambda: None, Path("/nonexistent"), 10.0),  # type: ignore[arg-type]
        [parse_event("0.1s:cap-iops=10,for=0.2s")],
        {"cap-iops": action},
    )
    s.start(time.time())
    time.sleep(1.0)
    (mark,) = s.finish(5)
    undo_began = dict(log)["undo 0.1s:cap-iops=10,for=0.2s"]
    assert mark.undone_s is not None and mark.facts["undo"] == {"checked": True}
    if ends_as_undo_begins:  # taken as the undo was called, before it restored
        assert mark.undone_s <= undo_began, (mark.undone_s, log)
    else:  # after the 0.4 s of checking
        assert mark.undone_s >= undo_began + 0.4, (mark.undone_s, log)


def test_an_action_that_fails_ends_the_schedule_and_later_events_are_skipped():
    log: list[tuple[str, float]] = []
    s = schedule(["0.1s:cap-iops=99", "0.2s:restart"], log)
    s.start(time.time())
    time.sleep(0.4)
    failed, later = s.finish(5)
    assert failed.error == "it broke" and failed.applied_s is not None
    assert (
        later.skipped
        and later.applied_s is None
        and "an earlier event failed" in str(later.problem)
    )
    assert [what for what, _ in log] == ["apply 0.1s:cap-iops=99"]


def test_finishing_early_undoes_a_window_at_once_and_marks_what_never_ran():
    log: list[tuple[str, float]] = []
    s = schedule(["0.1s:cap-iops=5,for=5s", "3s:restart"], log)
    s.start(time.time())
    time.sleep(0.3)
    began = time.monotonic()
    capped, restart = s.finish(5)
    assert time.monotonic() - began < 1
    assert capped.undone_s is not None and capped.undone_s < 1
    assert capped.facts["undone_early"]
    assert restart.skipped and "the load ended before its time" in str(restart.problem)


def test_an_event_under_way_is_marked_at_once_and_disturbs_the_service_until_after_it():
    log: list[tuple[str, float]] = []
    s = schedule(["0.1s:restart"], log, took_s=0.3)
    s.start(time.time())
    time.sleep(0.25)
    (mark,) = s.marks()
    assert (
        mark.applied_s is not None and mark.back_s is None
    )  # under way: the load's failures are its
    assert s.disturbed()
    s.finish(5)
    assert s.disturbed()  # within the grace after it came back


def test_a_schedule_never_started_marks_every_event_skipped():
    s = schedule(["1s:restart"], [])
    (mark,) = s.finish(1)
    assert mark.skipped


def test_every_action_of_the_grammar_is_applied_by_its_module():
    # One registry: the grammar is the syntax the action modules declare.
    assert list(actions()) == list(action_syntaxes())
    assert all(a.syntax is action_syntaxes()[name] for name, a in actions().items())
    assert set(actions()) == {
        "checkpoint", "restart", "crash", "exec", "cap-iops", "slow-storage", "failover",
        "partition", "switchover", "delete-pod", "move", "drain",
    }  # fmt: skip


def test_checks_refuse_what_a_target_cannot_take_before_anything_starts(tmp_path: Path):
    install = PgInstall(bindir=tmp_path, version="15.0", source="test")
    local = LocalTarget(tmp_path, install, options=LocalOptions(name="/data/a"))
    dsn = DsnTarget("postgresql://app@db.example/app", name="postgresql://db.example/app")
    specs = [parse_event(t) for t in ("1s:restart", "2s:crash", "3s:checkpoint")]
    assert checks.refusals(local, specs) == []
    refused = checks.refusals(dsn, specs)
    assert len(refused) == 2
    assert refused[0].startswith("postgresql://db.example/app: event 1s:restart: restart needs")
    assert "an existing server (a postgresql:// URI) is not one" in refused[0]
    assert refused[1].startswith("postgresql://db.example/app: event 2s:crash: crash needs")
    # in words: never the capabilities' class names (issue 35: "(Drainable, PodRecreatable)")
    assert not any(c in " ".join(refused) for c in ("Restartable", "Crashable", "Identity"))
    (failover,) = checks.refusals(local, [parse_event("5s:failover")])
    assert failover == (
        "/data/a: event 5s:failover: failover needs standbys to promote (--replicas N): this "
        "target has none"
    )
    (dsn_failover,) = checks.refusals(dsn, [parse_event("5s:failover")])
    assert (
        "failover needs standbys howfast started" in dsn_failover
        and "Promotable" not in dsn_failover
    )
    (slow,) = checks.refusals(local, [parse_event("5s:slow-storage=5ms")])
    assert slow == (
        "/data/a: event 5s:slow-storage=5ms: slow-storage changes an emulated volume's latency: "
        "give --storage-latency (0ms works)"
    )
    (missing,) = checks.refusals(local, [parse_event("5s:exec=no-such-program-howfast a")])
    assert missing.endswith("no-such-program-howfast is not an executable command here (not "
                            "found on PATH)")  # fmt: skip
    assert checks.refusals(local, [parse_event("5s:exec=true")]) == []


@pytest.mark.parametrize("text", ["1s:restart", "1s:exec=true"])
def test_the_registry_gives_each_action_its_name(text: str):
    spec = parse_event(text)
    assert actions()[spec.action].name == spec.action


def test_an_iops_cap_is_lifted_to_the_rules_from_before_it():
    from howfast.events.cap_iops import _holds
    from howfast.iolimits import iops_cap_lines, lifted_lines

    assert iops_cap_lines("v1", "8:0", 50) == {
        "blkio.throttle.read_iops_device": "8:0 50",
        "blkio.throttle.write_iops_device": "8:0 50",
    }
    assert lifted_lines("v1", "8:0", {"blkio.throttle.read_iops_device": "8:16 7\n"}) == {
        "blkio.throttle.read_iops_device": "8:0 0",
        "blkio.throttle.write_iops_device": "8:0 0",
    }
    before = {"io.max": "8:0 rbps=1048576 wbps=max riops=max wiops=300\n"}
    assert lifted_lines("v2", "8:0", before) == {"io.max": before["io.max"].strip()}
    assert lifted_lines("v2", "8:0", {"io.max": ""}) == {
        "io.max": "8:0 riops=max wiops=max rbps=max wbps=max"
    }
    (v2,) = iops_cap_lines("v2", "8:0", 50).values()
    assert _holds("8:0 riops=50 wiops=50\n", v2)  # io.max shows only what is set
    assert not _holds("8:0 riops=50\n", v2)
    assert _holds("8:0 50\n8:16 9", "8:0 50") and not _holds("8:0 60", "8:0 50")


def test_an_undo_without_a_window_runs_after_the_load_and_leaves_no_window():
    log: list[tuple[str, float]] = []
    acts: dict[str, EventAction] = {"cap-iops": Recorder("cap-iops", log)}

    undone: list[str] = []

    class Lasting(Recorder):
        def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
            applied = super().apply(ctx, spec)

            def undo() -> Mapping[str, JSONValue]:
                undone.append(spec.text)
                return {"restored": True}

            return Applied(applied.applied_s, None, undo=undo)

    acts["cap-iops"] = Lasting("cap-iops", log)
    s = EventSchedule(
        lambda now: EventContext(None, now, lambda: None, Path("/nonexistent"), 10.0),  # type: ignore[arg-type]
        [parse_event("0.1s:cap-iops=7")],
        acts,
    )
    s.start(time.time())
    time.sleep(0.3)
    # the last event is applied, and the load goes on: the cap lasts until the load's end
    assert len(s.marks()) == 1 and undone == []
    (mark,) = s.finish(5)
    assert undone == ["0.1s:cap-iops=7"]
    assert mark.undone_s is None and mark.facts["restored_after_load"] is True
    assert mark.facts["undo"] == {"restored": True}


def test_the_live_view_says_what_each_event_did():
    from howfast.event_marks import EventMark, progress_line

    ok = EventMark(1, "3s:restart", "restart", 3.0, applied_s=3.01, back_s=3.42, verified=True)
    # no figure of the outage: the recorded one comes from the load's commits, printed once
    # the step ended (issue 35: a live 5.42 s against a recorded 0.34 s)
    assert progress_line(ok) == "3 s: 3s:restart applied (verified)"
    bad = EventMark(2, "5s:exec=false", "exec", 5.0, applied_s=5.0, verified=False,
                    problem="false exited with status 1")  # fmt: skip
    assert progress_line(bad) == (
        "5 s: 5s:exec=false applied (NOT verified: false exited with status 1)"
    )
    failed = EventMark(3, "7s:crash", "crash", 7.0, applied_s=7.0, error="did not start")
    assert progress_line(failed) == "7 s: 7s:crash failed: did not start"


def test_a_runs_events_are_refused_once_each_with_the_step_or_the_target_named(tmp_path: Path):
    from howfast.events.step import refusals, step_events
    from howfast.model import StepSpec

    install = PgInstall(bindir=tmp_path, version="15.0", source="test")
    local = LocalTarget(tmp_path, install, options=LocalOptions(name="/data/a"))
    dsn = DsnTarget("postgresql://app@db.example/app", name="postgresql://db.example/app")
    events: list[JSONValue] = ["3s:restart", "30s:checkpoint"]
    steps = [
        StepSpec("pgbench-init", {"scale": 1}),
        StepSpec(
            "pgbench", {"mode": "tpcb-like", "clients": 1, "duration_s": 10, "events": events}
        ),
        StepSpec(
            "pgbench", {"mode": "tpcb-like", "clients": 2, "duration_s": 10, "events": events}
        ),
    ]
    assert [s.text for s in step_events(steps[1].params)] == ["3s:restart", "30s:checkpoint"]
    assert refusals([local, dsn], steps) == [
        "event 30s:checkpoint is past the end of a 10 s step",
        "postgresql://db.example/app: event 3s:restart: restart needs a server howfast "
        "started and holds (a directory or an emulated volume), and an existing server "
        "(a postgresql:// URI) is not one",
    ]
    by_count = [StepSpec("pgbench", {"clients": 1, "transactions": 100, "events": ["1s:crash"]})]
    assert refusals([local], by_count) == [
        "events need a duration: -t steps end when their transactions are done"
    ]
    assert refusals([local, dsn], steps[:1]) == []


def test_failover_is_refused_for_a_standby_the_design_lacks_and_with_two_standbys(
    tmp_path: Path,
):
    from howfast.targets.replicas.spec import ReplicaSpec

    install = PgInstall(bindir=tmp_path, version="15.0", source="test")
    one = LocalTarget(
        tmp_path, install, options=LocalOptions(name="/data/a"), replicas=ReplicaSpec(1, "on")
    )
    assert one.promotable_standbys() == ("standby_1",)
    assert checks.refusals(one, [parse_event("5s:failover")]) == []
    assert checks.refusals(one, [parse_event("5s:failover=standby_1")]) == []
    (unknown,) = checks.refusals(one, [parse_event("5s:failover=standby_2")])
    assert unknown.endswith("there is no standby_2 to promote (the standbys: standby_1)")
    two = LocalTarget(
        tmp_path, install, options=LocalOptions(name="/data/b"), replicas=ReplicaSpec(2, "on")
    )
    (refused,) = checks.refusals(two, [parse_event("5s:failover")])
    assert refused.endswith(
        "failover with more than one standby is not available yet (the others would have to "
        "follow the new primary): give --replicas 1"
    )
    # the load follows the promoted standby by the servers' sockets: not over TCP (yet)
    tcp = LocalTarget(
        tmp_path,
        install,
        replicas=ReplicaSpec(1, "on"),
        options=LocalOptions(name="/data/c", client="tcp"),
    )
    (over_tcp,) = checks.refusals(tcp, [parse_event("5s:failover")])
    assert over_tcp.endswith(
        "failover with --client tcp is not available yet: give --client socket"
    )


def test_nothing_that_acts_on_the_server_may_follow_a_failover_in_its_step(tmp_path: Path):
    from howfast.targets.replicas.spec import ReplicaSpec

    install = PgInstall(bindir=tmp_path, version="15.0", source="test")
    one = LocalTarget(
        tmp_path, install, options=LocalOptions(name="/data/a"), replicas=ReplicaSpec(1, "on")
    )
    texts = ["2s:restart", "4s:failover", "5s:checkpoint", "6s:crash", "7s:failover"]
    refused = checks.refusals(one, [parse_event(t) for t in texts])
    assert refused == [
        f"/data/a: event {t}: after a failover the old primary is gone and no standby is left: "
        f"{t.split(':')[1]} cannot follow it in the same step"
        for t in ("6s:crash", "7s:failover")
    ]


def test_the_old_primary_is_never_started_again_after_a_failover(tmp_path: Path):
    from howfast.errors import HowfastError

    install = PgInstall(bindir=tmp_path, version="15.0", source="test")
    target = LocalTarget(tmp_path, install, options=LocalOptions(name="/data/a"))
    target.takeover.promoted = "standby_1"  # what fail_over() leaves
    for act in (target.restart, target.crash, lambda: target.fail_over("standby_1")):
        with pytest.raises(HowfastError, match="the old primary is never started again"):
            act()
    # nothing to rebuild from: the promoted standby is not one of this target's
    with pytest.raises(HowfastError, match="the promoted standby_1 is not a standby of this"):
        target.restore_design()
    target.takeover.promoted = None
    assert target.restore_design() is None  # no failover: nothing to rebuild


def test_a_promoted_server_is_not_restarted_crashed_or_capped(tmp_path: Path):
    """After a rebuild the primary is the promoted standby: the actions that act on the
    original primary's server refuse, saying why; its log and data are the promoted one's."""
    from howfast.targets.osuser import OsUser
    from howfast.targets.replicas.local import LocalStandby

    install = PgInstall(bindir=tmp_path, version="15.0", source="test")
    target = LocalTarget(tmp_path, install, options=LocalOptions(name="/data/a"))
    user = OsUser("postgres", os.getuid(), os.getgid())
    target.takeover.serving = LocalStandby("standby_1", install, user, tmp_path / "s", tmp_path)
    for act in (target.restart, target.crash, lambda: target.cap_iops(100)):
        with pytest.raises(HowfastError, match="the primary is the promoted standby_1"):
            act()
    assert target.storage_paths() == {"data": tmp_path / "s/data", "wal": tmp_path / "s/data"}
    assert target.server_log_file() == tmp_path / "standby_1.log"
    assert target.memory_cgroup() is None and not target.alive()


def test_the_service_is_back_when_the_server_answers_not_when_its_standbys_stream():
    """A restart or crash with standbys returns once they stream again (a failover after it
    needs one that streams); the time spent waiting for them is not time without service."""
    from howfast.events.identity import service_back

    ctx = EventContext(None, lambda: 12.5, lambda: None, Path("/nonexistent"), 20.0)  # type: ignore[arg-type]
    assert service_back(ctx, {"standbys_streaming_s": 5.25}) == 7.25
    assert service_back(ctx, {}) == 12.5
    assert service_back(ctx, {"standbys_streaming_s": None}) == 12.5
