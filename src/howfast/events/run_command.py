"""exec=ARGV: the user's command, on this machine, as howfast's user, never through a shell.

It runs in a session and process group of its own, with only the environment it needs
(events/exec_env.py: no PGPASSWORD, no other howfast variable unless the user names it in
HOWFAST_EXEC_ENV), its output in the step's private scratch directory; it may run until the
load's end. Whatever it started is stopped with it, as a group (events/process_group.py): at
the load's end, on Ctrl-C, on errors; what it left running after it ended, after the load.
Its recorded output is redacted. Verified by its exit status 0."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.events.exec_env import (
    exec_environment,
    known_secrets,
    named_variables,
    redact_output,
)
from howfast.events.process_group import GRACE_S, ExecGroup
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.model import JSONValue
from howfast.targets.base import Target
from howfast.targets.leftovers.exec_groups import forget_group, record_group
from howfast.units import plain_number

KEPT_BYTES = 4096  # of its output, in the record
MIN_TIMEOUT_S = 1.0
REDACT_MARGIN = 1024  # read before the kept tail: a secret cut by the tail is still found


def _tail(path: Path, secrets: list[str]) -> str:
    """The output's last KEPT_BYTES, redacted. Redacted on a longer stretch then cut: a
    password that straddles the tail's start is hidden whole, not shown in part."""
    margin = REDACT_MARGIN + max((len(s.encode()) for s in secrets), default=0)
    with path.open("rb") as file:
        size = file.seek(0, os.SEEK_END)
        file.seek(max(0, size - KEPT_BYTES - margin))
        data = file.read()
    text = redact_output(data.decode(errors="replace"), secrets)
    return text if len(data) <= KEPT_BYTES else text[-KEPT_BYTES:]


class RunCommand(EventAction):
    # A user's command may do anything: its effect on the service is not known.
    syntax = ActionSyntax("exec", "argv", arg_required=True, may_disturb_service=True, order=40)
    summary = "the user's command, on this machine, never through a shell"
    docs = "docs/events.md#the-actions"

    def __init__(self, environ: Mapping[str, str] | None = None, grace_s: float = GRACE_S) -> None:
        self._environ = environ  # howfast's environment; None: os.environ when applied
        self.grace_s = grace_s  # SIGTERM to the group, SIGKILL after this

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def refusal(self, target: Target, spec: EventSpec) -> str | None:
        try:
            named_variables(self.environ)
        except ValueError as exc:
            return str(exc)
        program = spec.argv[0] if spec.argv else ""
        if shutil.which(program) is None:
            return f"{program} is not an executable command here (not found on PATH)"
        return None

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        ctx.scratch.mkdir(parents=True, exist_ok=True)
        out, err = output_files(ctx.scratch, spec.at_s)
        connection = ctx.primary()
        environ = self.environ
        env = exec_environment(
            environ, connection, event_at=plain_number(spec.at_s), target=ctx.target.name
        )
        secrets = known_secrets(environ, connection)
        applied = ctx.now()
        timeout = max(MIN_TIMEOUT_S, ctx.load_s - applied)
        with out.open("wb") as stdout, err.open("wb") as stderr:
            leader = subprocess.Popen(
                list(spec.argv),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=env,
                start_new_session=True,  # its own session and process group: stopped whole
            )
        group = ExecGroup(leader)
        # for `howfast cleanup`, should this howfast be killed while the group lives
        record = record_group(ctx.scratch, group.pgid)
        lasting = False
        stopped: str | None = None
        status: int | None = None
        unregister = ctx.cancel.on_cancel(group.terminate)
        try:
            status = group.wait_leader(timeout, lambda: ctx.cancel.cancelled)
            ctx.cancel.raise_if_cancelled()
            # It ended, and left processes running: they may go on until the load's end
            # (the command started them for that), then they are stopped with the rest.
            lasting = status is not None and bool(group.members())
        finally:
            unregister()
            if not lasting:
                stopped = group.stop(self.grace_s)
                forget_group(record)
        facts: dict[str, JSONValue] = {
            "argv": [redact_output(a, secrets) for a in spec.argv],
            "pid": group.pgid,
            "status": status,
            "seconds": round(ctx.now() - applied, 3),
            "stdout": _tail(out, secrets),
            "stderr": _tail(err, secrets),
        }
        if status is None:
            facts["timed_out_s"] = round(timeout, 3)
            facts["stopped_with"] = stopped
        elif lasting:
            facts["left_running"] = len(group.members())
            return Applied(
                applied, None, facts=facts, undo=lambda: _stop_lasting(group, self.grace_s, record)
            )
        elif stopped is not None:  # what it left ended between the two looks
            facts["stopped_with"] = stopped
        return Applied(applied, None, facts=facts)

    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified:
        status = applied.facts.get("status")
        evidence: dict[str, JSONValue] = {"status": status}
        if status == 0:
            return Verified(True, evidence)
        last = str(applied.facts.get("stderr") or "").strip().splitlines()[-3:]
        said = f": {' / '.join(last)}" if last else ""
        if status is None:
            return Verified(
                False, evidence, f"{spec.argv[0]} still ran at the load's end and was stopped{said}"
            )
        return Verified(False, evidence, f"{spec.argv[0]} exited with status {status}{said}")


def _stop_lasting(group: ExecGroup, grace_s: float, record: Path | None) -> dict[str, JSONValue]:
    """After the load (or on Ctrl-C, an error): what the command left running, stopped."""
    stopped = group.stop(grace_s)
    forget_group(record)
    return {"stopped_group": group.pgid, "stopped_with": stopped}


ACTION = RunCommand()


def output_files(scratch: Path, at_s: float) -> tuple[Path, Path]:
    """The files an exec event's stdout and stderr go to, new ones even when two events share
    a time; the time printed as it reads back (`%g` made 1234567 s `1.23457e+06`)."""
    base = f"exec-{plain_number(at_s)}"
    name, n = base, 0
    while (scratch / f"{name}.out").exists() or (scratch / f"{name}.err").exists():
        n += 1
        name = f"{base}-{n}"
    return scratch / f"{name}.out", scratch / f"{name}.err"
