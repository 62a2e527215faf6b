"""exec=ARGV: the user's command, on this machine, as howfast's user, never through a shell.
It runs in its own session (Ctrl-C stops it by its PID, through howfast), with
HOWFAST_EVENT_AT and HOWFAST_TARGET in its environment, its output in the step's private
scratch directory; it may run until the load's end. Verified by its exit status 0."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess

from howfast.events.base import Applied, EventAction, EventContext, Verified
from howfast.eventspec import EventSpec
from howfast.model import JSONValue
from howfast.targets.base import Target

KEPT_BYTES = 4096  # of its output, in the record
MIN_TIMEOUT_S = 1.0


def _tail(data: bytes) -> str:
    return data[-KEPT_BYTES:].decode(errors="replace")


class RunCommand(EventAction):
    name = "exec"

    def refusal(self, target: Target, spec: EventSpec) -> str | None:
        program = spec.argv[0] if spec.argv else ""
        if shutil.which(program) is None:
            return f"{program} is not an executable command here (not found on PATH)"
        return None

    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied:
        out, err = ctx.scratch / f"exec-{spec.at_s:g}.out", ctx.scratch / f"exec-{spec.at_s:g}.err"
        ctx.scratch.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "HOWFAST_EVENT_AT": f"{spec.at_s:g}",
            "HOWFAST_TARGET": ctx.target.name,
        }
        applied = ctx.now()
        timeout = max(MIN_TIMEOUT_S, ctx.load_s - applied)
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(
                list(spec.argv),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=env,
                start_new_session=True,
            )
            unregister = ctx.cancel.on_cancel(lambda: _terminate(proc))
            try:
                status: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _stop(proc)
                status = None
            finally:
                unregister()
        if ctx.cancel.cancelled:
            _stop(proc)
            ctx.cancel.raise_if_cancelled()
        facts: dict[str, JSONValue] = {
            "argv": list(spec.argv),
            "pid": proc.pid,
            "status": status,
            "seconds": round(ctx.now() - applied, 3),
            "stdout": _tail(out.read_bytes()),
            "stderr": _tail(err.read_bytes()),
        }
        if status is None:
            facts["timed_out_s"] = round(timeout, 3)
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


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """Quick, for a cancel callback: SIGTERM to the command, by its PID."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM its session's leader, SIGKILL after 5 s; only that process, by its PID."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


ACTION = RunCommand()
