"""The exec event (events/run_command.py): the environment its command gets, its recorded
output redacted, and its process group stopped whole. Real commands (env, sh, sleep) run
here; the target is a real DsnTarget, which only parses its URI until it is started (no
server is needed: the command is given where the server is, it does not connect)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from howfast.cancel import NEVER, CancelToken
from howfast.errors import Aborted
from howfast.events.base import EventContext
from howfast.events.exec_env import (
    NAMED_ENV,
    exec_environment,
    known_secrets,
    named_variables,
)
from howfast.events.process_group import group_members
from howfast.events.run_command import KEPT_BYTES, RunCommand
from howfast.eventspec import EventSpec
from howfast.store import liveness
from howfast.targets.dsn import DsnTarget, parse_dsn
from howfast.targets.leftovers.exec_groups import (
    GroupRecord,
    ProcStat,
    members,
    read_stats,
    record_group,
    recorded_groups,
    stop_recorded_groups,
)

DSN_PW = "dsn-pw-7Hq2"  # each secret distinct: a leak says which path it came through
ENV_PW = "env-pw-Lw9x"
URI_PW = "uri-pw-Zc4m"
HOWFAST_ENV = {
    "PATH": os.environ["PATH"],
    "HOME": "/home/someone",
    "LANG": "C.UTF-8",
    "LC_TIME": "C",
    "TZ": "UTC",
    "PGPASSWORD": ENV_PW,
    "HOWFAST_STORE": "/somewhere/store.db",
    "AWS_SECRET_ACCESS_KEY": "aws-key-Mn3v",
    "MY_PROFILE": "bench",
}
DSN = f"postgresql://bench:{DSN_PW}@127.0.0.1:5999/db?sslmode=disable"


def context(tmp_path: Path, load_s: float = 30.0, cancel: CancelToken = NEVER) -> EventContext:
    target = DsnTarget(DSN)
    origin = time.monotonic()
    return EventContext(
        target,
        lambda: time.monotonic() - origin,
        lambda: target.connection,
        tmp_path / "events",
        load_s,
        cancel,
    )


def spec(*argv: str, at_s: float = 0.0) -> EventSpec:
    return EventSpec(at_s, "exec", argv=argv, given="exec=" + " ".join(argv))


def gone(pid: int) -> bool:
    """No such process, or one that ended and waits to be collected (by init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def wait_gone(pid: int, within_s: float = 5.0) -> bool:
    """init collects an orphan at its own pace: give it a moment."""
    deadline = time.monotonic() + within_s
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return gone(pid)


# -- the environment ----------------------------------------------------------------------
def test_the_environment_is_what_a_program_needs_and_where_the_server_is():
    env = exec_environment(
        HOWFAST_ENV, parse_dsn(DSN), event_at="2", target="postgresql://bench:***@127.0.0.1"
    )
    assert env == {
        "PATH": os.environ["PATH"],
        "HOME": "/home/someone",
        "LANG": "C.UTF-8",
        "LC_TIME": "C",
        "TZ": "UTC",
        "PGHOST": "127.0.0.1",
        "PGPORT": "5999",
        "PGDATABASE": "db",
        "PGUSER": "bench",
        "PGSSLMODE": "disable",
        "HOWFAST_EVENT_AT": "2",
        "HOWFAST_TARGET": "postgresql://bench:***@127.0.0.1",
    }


def test_named_variables_are_passed_and_only_they():
    environ = {**HOWFAST_ENV, NAMED_ENV: "MY_PROFILE, PGPASSWORD,UNSET_ONE"}
    assert named_variables(environ) == ("MY_PROFILE", "PGPASSWORD", "UNSET_ONE")
    env = exec_environment(environ, parse_dsn(DSN), event_at="2", target="t")
    assert env["MY_PROFILE"] == "bench" and env["PGPASSWORD"] == ENV_PW  # asked for by name
    assert "UNSET_ONE" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert "HOWFAST_STORE" not in env and NAMED_ENV not in env
    # the event's own variables and the server's facts say where this event is: they win
    environ = {**HOWFAST_ENV, NAMED_ENV: "PGHOST HOWFAST_EVENT_AT", "PGHOST": "elsewhere"}
    env = exec_environment(environ, parse_dsn(DSN), event_at="2", target="t")
    assert env["PGHOST"] == "127.0.0.1" and env["HOWFAST_EVENT_AT"] == "2"


@pytest.mark.parametrize("names", ["MY-PROFILE", "1ABC", "A=B", "PROFILE;rm"])
def test_a_name_that_is_no_variable_is_refused_before_the_run(names: str):
    with pytest.raises(ValueError, match=f"{NAMED_ENV}: .* is not an environment variable"):
        named_variables({NAMED_ENV: names})
    action = RunCommand({**HOWFAST_ENV, NAMED_ENV: names})
    why = action.refusal(DsnTarget(DSN), spec("env"))
    assert why is not None and NAMED_ENV in why


def test_the_secrets_it_knows_are_the_servers_howfasts_and_named_ones():
    environ = {**HOWFAST_ENV, NAMED_ENV: "DB_URL", "DB_URL": "postgresql://u:named-pw@h/d"}
    assert set(known_secrets(environ, parse_dsn(DSN))) == {DSN_PW, ENV_PW, "named-pw"}
    assert known_secrets({}, parse_dsn("postgresql://u@h/d")) == []


# -- the command, run ---------------------------------------------------------------------
def test_env_shows_no_password_and_no_howfast_variable(tmp_path: Path):
    action = RunCommand(HOWFAST_ENV)
    applied = action.apply(context(tmp_path), spec("env", at_s=0.5))
    assert applied.facts["status"] == 0
    shown = dict(
        line.split("=", 1) for line in str(applied.facts["stdout"]).splitlines() if "=" in line
    )
    assert shown["PGHOST"] == "127.0.0.1" and shown["PGUSER"] == "bench"
    assert shown["HOWFAST_EVENT_AT"] == "0.5" and shown["LANG"] == "C.UTF-8"
    assert "PGPASSWORD" not in shown and "HOWFAST_STORE" not in shown
    assert "AWS_SECRET_ACCESS_KEY" not in shown
    for secret in (DSN_PW, ENV_PW, "aws-key-Mn3v"):
        assert secret not in str(applied.facts)


def test_its_recorded_output_and_argv_are_redacted(tmp_path: Path):
    script = (
        f"echo {DSN_PW}; echo postgresql://u:{URI_PW}@h/db; echo host=h password={URI_PW}x; "
        f"echo {ENV_PW} >&2"
    )
    action = RunCommand(HOWFAST_ENV)
    applied = action.apply(context(tmp_path), spec("sh", "-c", script))
    assert applied.facts["status"] == 0
    recorded = str(applied.facts)
    for secret in (DSN_PW, URI_PW, ENV_PW):
        assert secret not in recorded
    assert str(applied.facts["stdout"]).splitlines() == [
        "***",
        "postgresql://u:***@h/db",
        "host=h password=***",
    ]
    assert str(applied.facts["stderr"]).strip() == "***"


def test_a_password_cut_by_the_kept_tail_is_not_shown_in_part(tmp_path: Path):
    # The password ends just inside the last KEPT_BYTES: the tail starts in its middle.
    filler = "x" * (KEPT_BYTES - 4)
    action = RunCommand(HOWFAST_ENV)
    applied = action.apply(context(tmp_path), spec("printf", "%s", DSN_PW + filler))
    tail = str(applied.facts["stdout"])
    assert DSN_PW[-4:] + "xxxx" not in tail and DSN_PW[-3:] not in tail.rstrip("x")
    assert tail.endswith(filler) and len(tail) <= KEPT_BYTES


# -- its process group --------------------------------------------------------------------
def test_what_it_leaves_running_lasts_until_the_undo_then_the_group_goes(tmp_path: Path):
    pidfile = tmp_path / "sleep.pid"
    action = RunCommand(HOWFAST_ENV, grace_s=2)
    applied = action.apply(
        context(tmp_path), spec("sh", "-c", f'sleep 38 & echo $! > "{pidfile}"; exit 0')
    )
    grandchild = int(pidfile.read_text())
    pgid = int(str(applied.facts["pid"]))
    assert applied.facts["status"] == 0 and applied.facts["left_running"] == 1
    assert not gone(grandchild) and group_members(pgid) == [grandchild]
    assert applied.undo is not None
    undone = applied.undo()  # after the load, or on Ctrl-C (the schedule calls it)
    assert undone == {"stopped_group": pgid, "stopped_with": "SIGTERM"}
    assert wait_gone(grandchild) and group_members(pgid) == []


def test_at_the_loads_end_the_command_and_its_children_are_stopped(tmp_path: Path):
    pidfile = tmp_path / "sleep.pid"
    action = RunCommand(HOWFAST_ENV, grace_s=2)
    # SIGTERM ignored by the shell and inherited by its child: only SIGKILL ends them
    script = f'trap "" TERM; sleep 38 & echo $! > "{pidfile}"; sleep 39'
    applied = action.apply(context(tmp_path, load_s=1.0), spec("sh", "-c", script))
    grandchild = int(pidfile.read_text())
    assert applied.facts["status"] is None and applied.facts["stopped_with"] == "SIGKILL"
    assert applied.undo is None
    assert wait_gone(grandchild) and group_members(int(str(applied.facts["pid"]))) == []


def test_ctrl_c_stops_the_whole_group(tmp_path: Path):
    pidfile = tmp_path / "sleep.pid"
    cancel = CancelToken()
    action = RunCommand(HOWFAST_ENV, grace_s=2)
    raised: list[BaseException] = []

    def apply() -> None:
        try:
            action.apply(
                context(tmp_path, load_s=60.0, cancel=cancel),
                spec("sh", "-c", f'sleep 38 & echo $! > "{pidfile}"; sleep 39'),
            )
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=apply)
    thread.start()
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    cancel.cancel("SIGINT")
    thread.join(30)
    assert not thread.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], Aborted)
    assert wait_gone(grandchild)


# -- what a killed run's command left: recorded, then stopped by cleanup ------------------
def test_the_group_is_recorded_while_it_lives_and_forgotten_once_stopped(tmp_path: Path):
    pidfile = tmp_path / "sleep.pid"
    action = RunCommand(HOWFAST_ENV, grace_s=2)
    ctx = context(tmp_path)
    applied = action.apply(ctx, spec("sh", "-c", f'sleep 38 & echo $! > "{pidfile}"'))
    pgid = int(str(applied.facts["pid"]))
    (record,) = recorded_groups(ctx.scratch)
    assert record.pgid == pgid and record.boot_id == liveness.boot_id()
    assert applied.undo is not None
    applied.undo()
    assert recorded_groups(ctx.scratch) == [] and wait_gone(int(pidfile.read_text()))
    # a command that ends with nothing left behind leaves no record either
    action.apply(ctx, spec("true"))
    assert recorded_groups(ctx.scratch) == []


def test_cleanup_stops_a_recorded_group_that_no_howfast_stops(tmp_path: Path):
    """As after a SIGKILL of howfast: the group runs on, only its record says whose it is."""
    pidfile = tmp_path / "sleep.pid"
    script = f'trap "" TERM; sleep 38 & echo $! > "{pidfile}"; sleep 39'
    leader = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not pidfile.exists() or not pidfile.read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        grandchild = int(pidfile.read_text())
        private = tmp_path / "howfast-work-1-x" / "step-1" / "events"
        private.mkdir(parents=True)
        record = record_group(private, leader.pid)
        assert record is not None
        found = members(recorded_groups(private)[0], read_stats(), liveness.boot_id())
        group = {m.pid for m in found}  # the shell, `sleep 38` and `sleep 39`
        assert {leader.pid, grandchild} <= group and len(group) == 3
        stopped = stop_recorded_groups(tmp_path / "howfast-work-1-x")
        assert set(stopped) == group
        assert leader.wait(10) == -signal.SIGKILL  # it ignored SIGTERM: killed
        assert all(wait_gone(pid) for pid in group) and not record.exists()
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()


def test_a_record_names_no_strangers_group():
    record = GroupRecord(4242, 1000, "boot-a", Path("/x"))
    ours = [
        ProcStat(4242, "S", 4242, 4242, 1000),  # the command itself
        ProcStat(4250, "S", 4242, 4242, 1005),  # what it started
    ]
    assert members(record, ours, "boot-a") == ours
    assert members(record, ours, "boot-b") == []  # another boot: all of it ended
    # the command ended; its children stay in its group and session
    assert members(record, ours[1:], "boot-a") == ours[1:]
    # the id given again to another process: nothing of that group is ours
    stranger = [ProcStat(4242, "S", 4242, 4242, 9000), ProcStat(4260, "S", 4242, 4242, 9001)]
    assert members(record, stranger, "boot-a") == []
    # in the group but another session (it cannot be: setsid), older than the command,
    # or a zombie: not counted
    others = [
        ProcStat(4251, "S", 4242, 1, 1005),
        ProcStat(4252, "S", 4242, 4242, 999),
        ProcStat(4253, "Z", 4242, 4242, 1005),
    ]
    assert members(record, others, "boot-a") == []
    assert members(GroupRecord(4242, None, "boot-a", Path("/x")), ours, "boot-a") == []
