"""The load that survives an event: pgbench in short back-to-back segments (docs/events.md).

PostgreSQL 15-17's pgbench ends a client at a lost connection, and a run whose clients all
ended stops. So a step with events runs pgbench for at most `segment_s` seconds at a time,
starts the next segment as soon as one ends (early, when the server cut its connections),
and retries every `retry_s` while the server refuses them, until the step's duration is
spent. Every segment runs with `-n`: pgbench's own start-up cleanup (vacuum, truncate of
pgbench_history) would undo the count of commits, so howfast does it once, before the first
segment (history.py). Each segment writes its per-transaction log in its own directory,
`seg-N/txlog/`; stitch.py joins them into one timeline afterwards.

Two supervisors run the segments, with one argv for pgbench and one record per segment:

- `supervise`, for tools run on this machine: a Python loop that runs each segment as one
  Invocation on the step's host. Each pgbench is then a child of howfast, in its own session,
  stopped by its PID on Ctrl-C like any tool, and its PID reaches the samplers.
- `script_invocation`, for a pod, where an exec per segment would cost about 0.5 s: a fixed
  POSIX shell script, the same text for every step. Every value reaches it as a positional
  argument (`sh -c SCRIPT howfast-survive DURATION SEGMENT RETRY PGBENCH ARG...`); nothing
  is ever written into the script's text. It marks each segment on stderr
  (`howfast-segment N start|pid|end ...`), which `script_segments` reads back.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from howfast.cancel import NEVER, CancelToken
from howfast.event_marks import EventMark
from howfast.hosts.base import Invocation, ToolResult
from howfast.model import JSONValue
from howfast.plugin.events import gives_new_address, may_disturb_service
from howfast.targets.base import Connection
from howfast.workloads.pgbench import build

DEFAULT_SEGMENT_S = 10  # F15: 29-47 ms lost per boundary, a 0.995-0.997 steady-state ratio
RETRY_S = 0.1  # between connection attempts while the server does not answer
# After a second segment in a row that aborted sooner than this after it started, the next
# waits RETRY_S: a server that takes every connection and cuts it at once is not hammered in a
# tight loop. The first such abort is retried at once (the server may be back already).
QUICK_ABORT_S = 1.0
EVENT_GRACE_S = 2.0  # after an event's service came back, failures are still its own
# ... and longer after an event that gives the server a new address (a pod made again): the
# load's way to it may follow later than howfast's own check (a loaded lab: a client pod's
# connection to the moved pod timed out, 5 s, begun over 2 s after howfast's check saw it).
# A client pod's connect time-out (5 s) and a second more.
NEW_ADDRESS_GRACE_S = 6.0
SEGMENT_DIR = "seg-{}"
SCRIPT_NAME = "howfast-survive"  # $0 of the shell script: how `ps` shows it
MARKER = "howfast-segment"
PROCESSED = "number of transactions actually processed"

_DURATION_SENTINEL = 7_654_321  # a -T no step asks for: where run_argv puts the step's length


@dataclass(frozen=True)
class SegmentRun:
    """What one segment left: when it ran (epoch seconds on the client's clock), its exit
    status, its output, and its per-transaction logs. `ended_epoch` is None and `returncode`
    -1 when the script's stream stops before the segment's end."""

    number: int
    seconds: int  # -T
    started_epoch: float
    ended_epoch: float | None
    returncode: int
    stdout: str
    stderr: str
    log_files: tuple[Path, ...] = ()
    pid: int | None = None

    @property
    def ran(self) -> bool:
        """pgbench printed its summary: it connected and measured (aborted or not)."""
        return PROCESSED in self.stdout


@dataclass(frozen=True)
class Supervised:
    started_epoch: float  # the load's origin: when the first segment was started
    ended_epoch: float
    segments: tuple[SegmentRun, ...]
    stopped: str | None = None  # why the load ended before its duration


# --- what runs -------------------------------------------------------------------------------


def segment_seconds(remaining_s: float, segment_s: int) -> int:
    """-T of the next segment: `segment_s`, or what is left rounded to whole seconds; 0 when
    less than half a second is left (the load then ends)."""
    if remaining_s < 0.5:
        return 0
    return max(0, min(segment_s, int(remaining_s + 0.5)))


def base_argv(
    pgbench: str | PurePath,
    params: Mapping[str, JSONValue],
    *,
    jobs: int,
    conn_args: Sequence[str],
    progress: bool = True,
) -> list[str]:
    """A segment's pgbench argv without its -T: the quiet steps' argv (build.run_argv, with
    the same log, sampling, -P and -r) with -n after the program. The log prefix is relative:
    each segment runs in its own directory."""
    asked = {**params, "transactions": None, "duration_s": _DURATION_SENTINEL}
    argv = build.run_argv(
        pgbench,
        asked,
        jobs=jobs,
        log_prefix=build.LOG_PREFIX,
        conn_args=list(conn_args),
        progress=progress,
    )
    sentinel = str(_DURATION_SENTINEL)
    at = next(i for i in range(len(argv) - 1) if argv[i] == "-T" and argv[i + 1] == sentinel)
    return [argv[0], "-n", *argv[1:at], *argv[at + 2 :]]


def segment_argv(base: Sequence[str], seconds: int) -> list[str]:
    """The base argv with this segment's -T, right after the program (as the script puts it)."""
    return [base[0], "-T", str(seconds), *base[1:]]


def segment_invocation(base: Sequence[str], seconds: int, conn: Connection) -> Invocation:
    """One segment, run in its own directory on the step's host."""
    return Invocation(
        tuple(segment_argv(base, seconds)),
        env=conn.options_env(),
        secret_env=conn.secret_env(),
        dirs=(build.LOG_DIR,),
        outputs=(f"{build.LOG_PREFIX}*",),
        expected_s=float(seconds),
        timeout_s=seconds * 3.0 + 60,
    )


# --- the supervisor of tools run here --------------------------------------------------------

RunTool = Callable[[Invocation, str, Callable[[str], None]], ToolResult]
LineHandler = Callable[[int, float, str], None]  # (segment, its start epoch, stderr line)
StopRule = Callable[[SegmentRun], "str | None"]


@dataclass(frozen=True)
class Supervision:
    """How `supervise` runs the segments, besides what it runs: their length, the wait
    between failed attempts, what it reports, when it stops early, and its clock.
    `stop_reason` may end the load early after any segment, with its reason (a segment that
    failed while no event was under way, say). `on_started(origin_epoch)` is called once, as
    the first segment starts: the load's time 0, from which events are scheduled.
    `on_line(segment, its start epoch, text)` gets each line of pgbench's stderr."""

    segment_s: int = DEFAULT_SEGMENT_S
    retry_s: float = RETRY_S
    cancel: CancelToken = NEVER
    clock: Callable[[], float] = time.time
    on_line: LineHandler | None = None
    stop_reason: StopRule | None = None
    on_started: Callable[[float], None] | None = None


def supervise(
    base: Sequence[str],
    conn: Connection,
    *,
    duration_s: float,
    run: RunTool,
    how: Supervision = Supervision(),
) -> Supervised:
    """Run segments until `duration_s` has passed since the first one started. `run(invocation,
    subdir, on_line)` runs one on the step's host, in `seg-N/` (StepContext.run with
    track=True). Cancellation (`how.cancel`) raises Aborted from `run` or from the wait
    between attempts."""
    cancel, clock, on_line, stop_reason = how.cancel, how.clock, how.on_line, how.stop_reason
    started = clock()
    end = started + duration_s
    if how.on_started is not None:
        how.on_started(started)
    segments: list[SegmentRun] = []
    stopped = None
    quick_aborts = 0
    while True:
        cancel.raise_if_cancelled()
        seconds = segment_seconds(end - clock(), how.segment_s)
        if seconds == 0:
            break
        number = len(segments) + 1
        began = clock()

        def line(text: str, number: int = number, began: float = began) -> None:
            if on_line is not None:
                on_line(number, began, text)

        result = run(segment_invocation(base, seconds, conn), SEGMENT_DIR.format(number), line)
        segment = SegmentRun(
            number=number,
            seconds=seconds,
            started_epoch=began,
            ended_epoch=clock(),
            returncode=result.returncode,
            stdout=result.stdout,
            stderr=result.stderr,
            log_files=tuple(result.files[name] for name in sorted(result.files)),
        )
        segments.append(segment)
        stopped = stop_reason(segment) if stop_reason is not None else None
        if stopped is not None:
            break
        quick = segment.returncode != 0 and clock() - began < QUICK_ABORT_S
        quick_aborts = quick_aborts + 1 if quick and segment.ran else 0
        pause = (segment.returncode != 0 and not segment.ran) or quick_aborts >= 2
        if pause and cancel.wait(how.retry_s):
            cancel.raise_if_cancelled()
    return Supervised(started, clock(), tuple(segments), stopped)


def failure_without_event(
    segment: SegmentRun,
    origin_epoch: float,
    marks: Sequence[EventMark],
    *,
    grace_s: float = EVENT_GRACE_S,
) -> str | None:
    """A stop rule for `supervise`: why the load must end when a segment failed (it could not
    connect, or the server cut clients) while no event that may cut the service was under way
    (from its application to `grace_s` after the service came back, NEW_ADDRESS_GRACE_S more
    after one that gives the server a new address): the failure is the load's own (a wrong
    password, a script's error), and retrying it would only fill the step. None when the
    segment did not fail or an event explains it. `marks` are the events so far."""
    if segment.returncode == 0:
        return None
    lo = segment.started_epoch - origin_epoch
    hi = (segment.ended_epoch or segment.started_epoch) - origin_epoch
    for mark in marks:
        if mark.applied_s is None or not may_disturb_service(mark.action):
            continue
        back = mark.back_s if mark.back_s is not None else mark.undone_s
        grace = grace_s + (NEW_ADDRESS_GRACE_S if gives_new_address(mark.action) else 0.0)
        until = math.inf if back is None else back + grace
        if mark.applied_s <= hi and until >= lo:
            return None
    first = next((line for line in segment.stderr.splitlines() if line.strip()), "")
    what = "lost its clients" if segment.ran else "could not run"
    return (
        f"pgbench segment {segment.number} {what} while no event was under way "
        f"(status {segment.returncode}): {first.strip()}"
    )


# --- the supervisor of a pod: a fixed script, values as arguments ----------------------------

# $1 duration (s), $2 segment length (whole s), $3 retry (s), then pgbench's argv without -T.
# `date +%s.%N` where GNU date has it, whole seconds elsewhere: marks only; pgbench's logs
# give the exact times. The end is computed on the client's clock, once.
SUPERVISOR_SCRIPT = r"""dur=$1 seg=$2 retry=$3
shift 3
prog=$1
shift
now() { t=$(date +%s.%N); case $t in *N) date +%s ;; *) echo "$t" ;; esac; }
end=$(awk -v n="$(now)" -v d="$dur" 'BEGIN { printf "%.3f", n + d }')
n=0 p= q=0
trap 'if [ -n "$p" ]; then kill -INT "$p" 2>/dev/null; wait "$p"; fi; exit 130' INT TERM
while :; do
  T=$(awk -v e="$end" -v n="$(now)" -v s="$seg" \
    'BEGIN { r = e - n; l = (r < 0.5) ? 0 : int(r + 0.5); print (l < s) ? l : s }')
  [ "$T" -ge 1 ] || break
  n=$((n + 1))
  mkdir -p "seg-$n/txlog" || exit 1
  began=$(now)
  echo "howfast-segment $n start $began T $T" >&2
  (cd "seg-$n" && exec "$prog" -T "$T" "$@") > "seg-$n/out" &
  p=$!
  echo "howfast-segment $n pid $p" >&2
  wait "$p"
  rc=$?
  p=
  ended=$(now)
  echo "howfast-segment $n end $ended rc $rc" >&2
  if [ "$rc" -eq 0 ]; then q=0; continue; fi
  if ! grep -q "actually processed" "seg-$n/out"; then q=0; sleep "$retry"; continue; fi
  q=$(awk -v a="$began" -v b="$ended" -v q="$q" 'BEGIN { print (b - a < 1) ? q + 1 : 0 }')
  if [ "$q" -ge 2 ]; then sleep "$retry"; fi
done
"""


def script_argv(
    base: Sequence[str], *, duration_s: float, segment_s: int = DEFAULT_SEGMENT_S,
    retry_s: float = RETRY_S, shell: str = "/bin/sh",
) -> list[str]:  # fmt: skip
    """`sh -c SCRIPT howfast-survive DURATION SEGMENT RETRY PGBENCH ARG...`: the script's text
    is the constant above; every value, the user's included, is an argument after it."""
    if segment_s < 1:
        raise ValueError(f"a segment lasts at least 1 s, got {segment_s}")
    numbers = [f"{duration_s:.3f}", str(int(segment_s)), f"{retry_s:.3f}"]
    return [shell, "-c", SUPERVISOR_SCRIPT, SCRIPT_NAME, *numbers, *base]


def script_invocation(
    base: Sequence[str], conn: Connection, *, duration_s: float,
    segment_s: int = DEFAULT_SEGMENT_S, retry_s: float = RETRY_S,
) -> Invocation:  # fmt: skip
    return Invocation(
        tuple(script_argv(base, duration_s=duration_s, segment_s=segment_s, retry_s=retry_s)),
        env=conn.options_env(),
        secret_env=conn.secret_env(),
        outputs=("seg-*/out", f"seg-*/{build.LOG_PREFIX}*"),
        expected_s=duration_s,
        timeout_s=duration_s * 3 + 300,
    )


def script_segments(stderr: str, files: Mapping[str, Path]) -> tuple[SegmentRun, ...]:
    """The segments the script marked on its stderr, with the lines each one wrote between
    its start and end marks, its stdout (`seg-N/out`) and its logs, from the collected files."""
    found: dict[int, dict[str, object]] = {}
    current: int | None = None
    for text in stderr.splitlines():
        parts = text.split()
        if len(parts) >= 4 and parts[0] == MARKER and parts[1].isdigit():
            number, what = int(parts[1]), parts[2]
            item = found.setdefault(number, {"lines": []})
            if what == "start" and len(parts) >= 6:
                item["start"], item["seconds"] = float(parts[3]), int(parts[5])
                current = number
            elif what == "pid":
                item["pid"] = int(parts[3])
            elif what == "end" and len(parts) >= 6:
                item["end"], item["rc"] = float(parts[3]), int(parts[5])
                current = None
            continue
        if current is not None:
            lines = found[current]["lines"]
            assert isinstance(lines, list)
            lines.append(text)
    runs = []
    for number in sorted(found):
        item = found[number]
        if "start" not in item:
            continue
        directory = SEGMENT_DIR.format(number)
        out = files.get(f"{directory}/out")
        logs = sorted(p for name, p in files.items() if name.startswith(f"{directory}/txlog/"))
        lines = item["lines"]
        assert isinstance(lines, list)
        end = item.get("end")
        pid = item.get("pid")
        runs.append(
            SegmentRun(
                number=number,
                seconds=int(str(item["seconds"])),
                started_epoch=float(str(item["start"])),
                ended_epoch=float(str(end)) if end is not None else None,
                returncode=int(str(item.get("rc", -1))),
                stdout=out.read_text(errors="replace") if out is not None else "",
                stderr="".join(f"{line}\n" for line in lines),
                log_files=tuple(logs),
                pid=int(str(pid)) if pid is not None else None,
            )
        )
    return tuple(runs)
