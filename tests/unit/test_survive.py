"""The surviving load's builders: pgbench's argv per segment, the fixed shell script of a pod
(values only ever as arguments), the script's stream read back (a real recording), and the
Python supervisor's decisions (when to start the next segment, when to wait)."""

from __future__ import annotations

import dataclasses
import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from howfast.cancel import CancelToken
from howfast.errors import Aborted
from howfast.event_marks import EventMark
from howfast.hosts.base import Invocation, ToolResult
from howfast.targets.base import Connection
from howfast.workloads.pgbench import build
from howfast.workloads.pgbench.segments import parse_segment
from howfast.workloads.pgbench.survive import (
    PROCESSED,
    SUPERVISOR_SCRIPT,
    SegmentRun,
    Supervised,
    Supervision,
    base_argv,
    failure_without_event,
    script_argv,
    script_invocation,
    script_segments,
    segment_argv,
    segment_invocation,
    segment_seconds,
    supervise,
)

DATA = Path(__file__).parents[1] / "data" / "pgbench"
CONN = Connection(host="/run/howfast", port=5433, user="howfast", dbname="postgres",
                  password="s3cret", options={"sslmode": "disable"})  # fmt: skip
PARAMS = {"mode": "tpcb-like", "clients": 4, "duration_s": 60, "log_sampling_rate": 0.25}


@pytest.mark.parametrize(
    ("remaining", "segment", "seconds"),
    [(60, 10, 10), (10.2, 10, 10), (9.6, 10, 10), (9.4, 10, 9), (1.2, 10, 1), (0.6, 10, 1),
     (0.49, 10, 0), (-3, 10, 0), (25, 4, 4)],
)  # fmt: skip
def test_each_segment_lasts_the_segment_or_what_is_left_in_whole_seconds(
    remaining, segment, seconds
):
    assert segment_seconds(remaining, segment) == seconds


def test_a_segment_runs_the_quiet_steps_argv_with_n_and_its_own_duration():
    base = base_argv("/usr/bin/pgbench", PARAMS, jobs=2, conn_args=CONN.pgbench_args())
    quiet = build.run_argv("/usr/bin/pgbench", PARAMS, jobs=2, log_prefix=build.LOG_PREFIX,
                           conn_args=CONN.pgbench_args())  # fmt: skip
    assert base[:2] == ["/usr/bin/pgbench", "-n"]
    assert "-T" not in base and "60" not in base
    without_duration = [a for i, a in enumerate(quiet) if a != "-T" and quiet[i - 1] != "-T"]
    assert base == [without_duration[0], "-n", *without_duration[1:]]
    assert "--sampling-rate=0.25" in base and "--log-prefix=txlog/tx" in base
    argv = segment_argv(base, 7)
    assert argv[:4] == ["/usr/bin/pgbench", "-T", "7", "-n"] and argv[4:] == base[2:]


def test_transactions_never_reach_a_segment_and_user_arguments_stay_items():
    params = {**PARAMS, "transactions": 1000, "mode": "custom",
              "scripts": ["my script.sql"], "extra_args": ["-D", "x=$(rm -rf /);"]}  # fmt: skip
    base = base_argv("pgbench", params, jobs=1, conn_args=CONN.pgbench_args())
    assert "-t" not in base and "1000" not in base
    assert base[2:4] == ["-f", "my script.sql"]
    assert "x=$(rm -rf /);" in base


def test_a_segment_invocation_keeps_the_password_out_of_its_description():
    invocation = segment_invocation(["pgbench", "-n"], 10, CONN)
    assert invocation.secret_env == {"PGPASSWORD": "s3cret"}
    assert invocation.env == {"PGSSLMODE": "disable"}
    assert "s3cret" not in repr(invocation) + json.dumps(invocation.document())
    assert invocation.outputs == ("txlog/tx*",) and invocation.dirs == ("txlog",)
    assert invocation.argv[:3] == ("pgbench", "-T", "10")


def test_the_pod_script_is_one_fixed_text_and_every_value_an_argument_after_it():
    hostile = ["pgbench", "-n", "-f", "a'b\"c$(touch /tmp/x);`id`.sql", *CONN.pgbench_args()]
    argv = script_argv(hostile, duration_s=12.5, segment_s=4, retry_s=0.1)
    assert argv[:4] == ["/bin/sh", "-c", SUPERVISOR_SCRIPT, "howfast-survive"]
    assert argv[4:7] == ["12.500", "4", "0.100"]
    assert argv[7:] == hostile  # as items, never written into the script
    for value in (hostile[3], CONN.host, "12.5"):
        assert value not in SUPERVISOR_SCRIPT
    # the script uses its arguments only quoted: "$@", "$prog", "$1"...
    assert '"$prog" -T "$T" "$@"' in SUPERVISOR_SCRIPT
    assert "eval" not in SUPERVISOR_SCRIPT
    with pytest.raises(ValueError):
        script_argv(hostile, duration_s=10, segment_s=0)
    invocation = script_invocation(hostile, CONN, duration_s=12.5, segment_s=4)
    assert invocation.secret_env == {"PGPASSWORD": "s3cret"}
    assert "s3cret" not in " ".join(invocation.argv)
    assert invocation.outputs == ("seg-*/out", "seg-*/txlog/tx*")


def test_the_script_stream_is_read_back_into_segments():
    root = DATA / "survive-script-pg15"
    files = {str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file()}
    runs = script_segments((root / "stderr.txt").read_text(), files)
    assert [r.number for r in runs] == [1, 2, 3, 4, 5]
    assert [r.returncode for r in runs] == [0, 2, 1, 0, 0]
    assert [r.seconds for r in runs] == [2, 2, 2, 2, 1]
    assert all(r.pid for r in runs) and all(r.ended_epoch for r in runs)
    assert runs[0].started_epoch < runs[1].started_epoch < runs[1].ended_epoch  # type: ignore[operator]
    # the lines between a segment's marks are its own: progress, then the abort
    assert runs[0].stderr.startswith("progress: 1.0 s")
    assert "aborted in command" in runs[1].stderr and "howfast-segment" not in runs[1].stderr
    assert "shutting down" in runs[2].stderr
    segments = [parse_segment(r) for r in runs]
    assert [s.ran for s in segments] == [True, True, False, True, True]
    assert all(r.log_files for r, s in zip(runs, segments, strict=True) if s.ran)
    recorded = json.loads((root / "load.json").read_text())
    assert sum(s.acked or 0 for s in segments) == recorded["history_rows"]


def test_a_stream_cut_short_keeps_the_segment_without_an_end():
    stream = "howfast-segment 1 start 100.5 T 10\nhowfast-segment 1 pid 42\nprogress: 1.0 s\n"
    (run,) = script_segments(stream, {})
    assert run.ended_epoch is None and run.returncode == -1 and run.pid == 42
    assert run.stderr == "progress: 1.0 s\n" and not run.ran


# --- the supervisor's decisions ----------------------------------------------------------------
# The host is a stand-in here (the integration test runs real pgbench through a real restart
# and crash): it answers each segment with a recorded pgbench output and moves a fake clock, so
# that when the supervisor starts, retries and waits can be checked exactly.

OUT = {n: (DATA / f"segment-{n}-pg15.out").read_text() for n in ("restart", "refused")}
ERR = {n: (DATA / f"segment-{n}-pg15.err").read_text() for n in ("restart", "refused")}
COMPLETE = (DATA / "run-tpcb-pg15.txt").read_text()


class Scripted:
    """Answers segment k with script[k]: (status, stdout, stderr, seconds it lasts; None: its
    -T); the last answer repeats."""

    def __init__(
        self, script: list[tuple[int, str, str, float | None]], cancel: CancelToken
    ) -> None:
        self.script = script
        self.now = 1000.0
        self.calls: list[tuple[float, tuple[str, ...], str]] = []
        self.waits: list[float] = []
        self.cancel = cancel
        cancel.wait = self.wait  # type: ignore[method-assign]

    def clock(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return self.cancel.cancelled

    def run(
        self, invocation: Invocation, subdir: str, on_line: Callable[[str], None]
    ) -> ToolResult:
        self.calls.append((self.now, invocation.argv, subdir))
        rc, out, err, lasts = self.script[min(len(self.calls) - 1, len(self.script) - 1)]
        for line in err.splitlines():
            on_line(line)
        self.now += lasts if lasts is not None else int(invocation.argv[2])
        return ToolResult(rc, out, err)


def test_segments_follow_each_other_until_the_duration_and_an_abort_restarts_at_once():
    cancel = CancelToken()
    host = Scripted([(0, COMPLETE, "", None), (2, OUT["restart"], ERR["restart"], 3.0),
                     (1, "", ERR["refused"], 0.02), (1, "", ERR["refused"], 0.02),
                     (0, COMPLETE, "", None)], cancel)  # fmt: skip
    lines: list[tuple[int, float, str]] = []
    origins: list[float] = []
    how = Supervision(segment_s=10, cancel=cancel, clock=host.clock, on_started=origins.append,
                      on_line=lambda n, t, line: lines.append((n, t, line)))  # fmt: skip
    done = supervise(["pgbench", "-n"], CONN, duration_s=25, run=host.run, how=how)
    assert origins == [1000.0]  # once, as the first segment starts
    starts = [round(t - 1000, 2) for t, _, _ in host.calls]
    # 10 s, cut after 3 s and restarted at once, two refusals 0.1 s apart, then 10 s and
    # the 1.76 s left, rounded
    assert starts == [0.0, 10.0, 13.0, 13.12, 13.24, 23.24]
    assert [argv[2] for _, argv, _ in host.calls] == ["10", "10", "10", "10", "10", "2"]
    assert [subdir for _, _, subdir in host.calls] == [f"seg-{n}" for n in range(1, 7)]
    assert host.waits == [0.1, 0.1]
    assert done.started_epoch == 1000.0 and done.stopped is None
    assert [s.ran for s in done.segments] == [True, True, False, False, True, True]
    assert {n for n, _, _ in lines} == {2, 3, 4}
    assert lines[0][1] == 1010.0  # each line comes with its segment's start
    assert done.ended_epoch - done.started_epoch == pytest.approx(25.24)


def test_the_last_segment_takes_what_is_left():
    cancel = CancelToken()
    host = Scripted([(0, COMPLETE, "", None)], cancel)
    how = Supervision(cancel=cancel, clock=host.clock)
    supervise(["pgbench"], CONN, duration_s=13.2, run=host.run, how=how)
    assert [argv[2] for _, argv, _ in host.calls] == ["10", "3"]


def test_aborts_in_a_row_soon_after_starting_wait_between_attempts():
    cancel = CancelToken()
    host = Scripted([(2, OUT["restart"], ERR["restart"], 0.2)], cancel)
    how = Supervision(cancel=cancel, clock=host.clock)
    done = supervise(["pgbench"], CONN, duration_s=2, run=host.run, how=how)
    # the first quick abort is retried at once, the ones after it 0.1 s apart
    assert host.waits[0] == 0.1 and len(host.waits) == len(done.segments) - 1
    assert round(host.calls[1][0] - host.calls[0][0], 2) == 0.2


def test_a_stop_rule_ends_the_load_with_its_reason():
    cancel = CancelToken()
    host = Scripted([(1, "", ERR["refused"], 0.02)], cancel)

    def never_started(segment) -> str | None:  # type: ignore[no-untyped-def]
        return None if segment.ran else f"segment {segment.number} never ran"

    how = Supervision(cancel=cancel, clock=host.clock, stop_reason=never_started)
    done = supervise(["pgbench"], CONN, duration_s=30, run=host.run, how=how)
    assert len(done.segments) == 1 and done.stopped == "segment 1 never ran"


def test_cancelling_while_waiting_to_retry_raises_aborted():
    cancel = CancelToken()
    host = Scripted([(1, "", ERR["refused"], 0.02)], cancel)

    def run(invocation: Invocation, subdir: str, on_line: Callable[[str], None]) -> ToolResult:
        result = host.run(invocation, subdir, on_line)
        cancel.cancel("SIGINT")
        return result

    with pytest.raises(Aborted):
        how = Supervision(cancel=cancel, clock=host.clock)
        supervise(["pgbench"], CONN, duration_s=30, run=run, how=how)
    assert len(host.calls) == 1


def test_the_script_text_is_valid_posix_shell():
    assert "\n" in SUPERVISOR_SCRIPT
    shlex.split(SUPERVISOR_SCRIPT, comments=True)  # balanced quotes


def test_a_failure_no_event_explains_ends_the_load_and_one_an_event_explains_does_not():
    cut = SegmentRun(3, 10, 1012.0, 1012.4, 2, OUT["restart"], ERR["restart"])
    refused = SegmentRun(4, 10, 1012.5, 1012.52, 1, "", ERR["refused"])
    fine = SegmentRun(5, 10, 1012.6, 1022.6, 0, COMPLETE, "")
    restart = EventMark(1, "12s:restart", "restart", 12.0, applied_s=12.01, back_s=12.9)
    assert failure_without_event(fine, 1000.0, []) is None
    assert failure_without_event(cut, 1000.0, [restart]) is None
    assert failure_without_event(refused, 1000.0, [restart]) is None
    # the restart was over 2 s before: these failures are the load's own
    late = SegmentRun(6, 10, 1015.0, 1015.02, 1, "", ERR["refused"])
    reason = failure_without_event(late, 1000.0, [restart])
    assert reason is not None and reason.startswith(
        "pgbench segment 6 could not run while no event was under way (status 1): pgbench: "
        "error: connection to server on socket"
    )
    cut_alone = failure_without_event(cut, 1000.0, [])
    assert cut_alone is not None and "segment 3 lost its clients" in cut_alone
    # a checkpoint does not cut the service; an event still under way (no back_s) explains
    checkpoint = EventMark(2, "12s:checkpoint", "checkpoint", 12.0, applied_s=12.0, back_s=None)
    assert failure_without_event(cut, 1000.0, [checkpoint]) is not None
    crash = EventMark(3, "11s:crash", "crash", 11.0, applied_s=11.0)
    assert failure_without_event(late, 1000.0, [crash]) is None
    # a user's command may cut the service
    command = EventMark(4, "12s:exec=x", "exec", 12.0, applied_s=12.0, back_s=12.1)
    assert failure_without_event(refused, 1000.0, [command]) is None


def test_after_a_pod_made_again_the_loads_failures_are_the_events_for_longer():
    """A move (or delete-pod, drain) gives the server a new address, which the load's way to
    it may learn later than howfast's own check: a connection timing out (5 s) that began
    3 s after the service came back is the move's, as it would not be a restart's."""
    timed_out = SegmentRun(7, 10, 1015.9, 1020.9, 1, "", "pgbench: error: timeout expired")
    move = EventMark(5, "12s:move", "move", 12.0, applied_s=12.0, back_s=12.9)
    restart = EventMark(6, "12s:restart", "restart", 12.0, applied_s=12.0, back_s=12.9)
    assert failure_without_event(timed_out, 1000.0, [move]) is None
    assert failure_without_event(timed_out, 1000.0, [restart]) is not None
    for action in ("delete-pod", "drain"):
        mark = EventMark(7, f"12s:{action}", action, 12.0, applied_s=12.0, back_s=12.9)
        assert failure_without_event(timed_out, 1000.0, [mark]) is None, action
    # past both graces (2 s + 6 s after the service came back), the load's own again
    later = SegmentRun(8, 10, 1021.0, 1026.0, 1, "", "pgbench: error: timeout expired")
    assert failure_without_event(later, 1000.0, [move]) is not None


# --- the step's status from its events (issue 35) ----------------------------------------------


def _ran() -> Supervised:
    segment = SegmentRun(1, 10, 100.0, 110.0, 0, f"{PROCESSED} 100\n", "")
    return Supervised(started_epoch=100.0, ended_epoch=110.0, segments=(segment,))


def test_an_event_not_applied_fails_its_step_with_the_reason():
    """Before, a failover "not applied: the load ended before its time" (after a slow
    restart) left the step completed and the run's exit status 0: the step did not test what
    it was asked to."""
    from howfast.workloads.base import OutcomeDraft
    from howfast.workloads.pgbench.survive_step import _judge

    applied = EventMark(1, "2s:restart", "restart", 2.0, applied_s=2.0, back_s=2.4, verified=True)
    skipped = EventMark(2, "5s:failover", "failover", 5.0, skipped=True,
                        problem="not applied: the load ended before its time")  # fmt: skip
    outcome = OutcomeDraft()
    _judge(outcome, _ran(), (applied, skipped))
    assert outcome.status == "failed"
    assert outcome.error == "event 5s:failover not applied: the load ended before its time"
    assert outcome.warnings == []  # the error says it: not again as a warning

    every_one = OutcomeDraft()
    _judge(every_one, _ran(), (applied,))
    assert (every_one.status, every_one.error) == ("completed", None)

    # a verification that failed stays a warning: the action was applied
    unverified = dataclasses.replace(applied, verified=False, problem="the same server answers")
    warned = OutcomeDraft()
    _judge(warned, _ran(), (unverified,))
    assert warned.status == "completed"
    assert warned.warnings == ["event 2s:restart was not verified: the same server answers"]
