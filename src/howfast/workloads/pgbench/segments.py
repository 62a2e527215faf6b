"""What one pgbench segment of a surviving load says (survive.py): how many transactions it
acknowledged, which clients the server cut and in which command, or why it never ran. Pure.

pgbench 15 writes a client's abort in two forms (tests/data/pgbench/segment-*-pg15.*):
- the server's error reached pgbench while a query ran:
  `client 3 script 0 aborted in command 10 query 0: FATAL:  terminating connection due to
  administrator command`;
- the connection was gone when pgbench looked:
  `client 1 aborted in command 6 (SQL) of script 0; perhaps the backend died while processing`.
Either way the summary still follows on stdout (`number of transactions actually processed:
N`: the commits it acknowledged), and pgbench exits with status 2. A segment that could not
connect exits with status 1 and prints no summary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from howfast.workloads.pgbench import parse
from howfast.workloads.pgbench.survive import SegmentRun

ABORT_IN_QUERY = re.compile(r"client (\d+) script (\d+) aborted in command (\d+) query \d+: (.*)")
ABORT_CONNECTION_GONE = re.compile(r"client (\d+) aborted in command (\d+) \(\w+\) of script (\d+)")
_CONNECT_ERROR = re.compile(r"^(?:pgbench: (?:error|fatal): )?(connection to .*|could not .*)")


@dataclass(frozen=True)
class Abort:
    client: int
    command: int  # 0-based, as `pgbench --show-script` lists the script's commands
    script: int
    reason: str  # the server's message, or "connection gone"


@dataclass(frozen=True)
class Segment:
    number: int
    seconds: int
    started_epoch: float
    ended_epoch: float | None
    returncode: int
    acked: int | None  # None: no summary, it never ran
    failed: int  # pgbench's failed transactions (retriable errors under --max-tries)
    aborts: tuple[Abort, ...]
    connect_error: str | None  # the first error line when it never ran

    @property
    def ran(self) -> bool:
        return self.acked is not None


def parse_aborts(stderr: str) -> tuple[Abort, ...]:
    """Every aborted client of a segment, in the order pgbench reported them."""
    aborts = []
    for line in stderr.splitlines():
        query = ABORT_IN_QUERY.search(line)
        if query:
            client, script, command, reason = query.groups()
            aborts.append(Abort(int(client), int(command), int(script), reason.strip()))
            continue
        gone = ABORT_CONNECTION_GONE.search(line)
        if gone:
            client, command, script = gone.groups()
            aborts.append(Abort(int(client), int(command), int(script), "connection gone"))
    return tuple(aborts)


def parse_segment(run: SegmentRun) -> Segment:
    summary = parse.parse_run(run.stdout + "\n" + run.stderr)
    acked = summary.transactions if run.ran else None
    connect_error = None
    if acked is None:
        connect_error = _first_error(run.stderr) or f"pgbench exited with status {run.returncode}"
    return Segment(
        number=run.number,
        seconds=run.seconds,
        started_epoch=run.started_epoch,
        ended_epoch=run.ended_epoch,
        returncode=run.returncode,
        acked=acked,
        failed=summary.failed or 0,
        aborts=parse_aborts(run.stderr),
        connect_error=connect_error,
    )


def _first_error(stderr: str) -> str | None:
    for line in stderr.splitlines():
        found = _CONNECT_ERROR.match(line.strip())
        if found:
            return found.group(1)
    return None


def final_command(show_script: str) -> int | None:
    """The 0-based index of a builtin script's END in what `pgbench --show-script=NAME` prints
    (on its stderr): 10 for tpcb-like, 8 for simple-update, the command a client was in when
    its commit is in doubt; None when the script does not end with END or COMMIT
    (select-only)."""
    commands = [
        line.strip()
        for line in show_script.splitlines()
        if line.strip() and not line.strip().startswith("--")
    ]
    if commands and commands[-1].rstrip(";").strip().upper() in ("END", "COMMIT"):
        return len(commands) - 1
    return None
