"""Checkpoints from the server log of a cluster howfast created (log_checkpoints = on).

PostgreSQL logs `checkpoint starting: <why>` when one begins and `checkpoint complete:
wrote N buffers (P%); ...` with what it did when it ends. The wording is the same from 15 to
17 except that 17 adds `; lsn=..., redo lsn=...` (and later releases more); the parser reads
each figure on its own, so that a field added later does not break it.

`parse_line` and `pair` are pure; `CheckpointSampler` follows the log during the step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from howfast.model import JSONValue
from howfast.samplers.base import PeriodicSampler, SamplerContext, SamplerResult
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.targets.capabilities import HasLocalServer

TAIL_BYTES = 64 * 1024  # how far back to look for a checkpoint already running

_KIND = re.compile(r"\b(checkpoint|restartpoint) (starting|complete):\s*(.*)$")
_TIME = re.compile(
    r"^\s*(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)"
    r"(?: ([A-Za-z][A-Za-z0-9_/+-]*|[+-]\d{2}(?::?\d{2})?))?"
)
_UTC_NAMES = frozenset({"UTC", "GMT", "UCT", "Z", "Etc/UTC", "Zulu"})
# Figures of a `complete` line: name -> (pattern, type)
_FIGURES: dict[str, tuple[re.Pattern[str], type]] = {
    "buffers": (re.compile(r"wrote (\d+) buffers"), int),
    "buffers_pct": (re.compile(r"wrote \d+ buffers \(([\d.]+)%\)"), float),
    "slru_buffers": (re.compile(r"wrote (\d+) SLRU buffers"), int),
    "wal_files_added": (re.compile(r"(\d+) (?:WAL|transaction log) file\(s\) added"), int),
    "wal_files_removed": (re.compile(r"(\d+) removed"), int),
    "wal_files_recycled": (re.compile(r"(\d+) recycled"), int),
    "write_s": (re.compile(r"\bwrite=([\d.]+) s"), float),
    "sync_s": (re.compile(r"\bsync=([\d.]+) s"), float),
    "total_s": (re.compile(r"\btotal=([\d.]+) s"), float),
    "sync_files": (re.compile(r"sync files=(\d+)"), int),
    "sync_longest_s": (re.compile(r"longest=([\d.]+) s"), float),
    "sync_average_s": (re.compile(r"average=([\d.]+) s"), float),
    "distance_kb": (re.compile(r"distance=(\d+) kB"), int),
    "estimate_kb": (re.compile(r"estimate=(\d+) kB"), int),
    "lsn": (re.compile(r"(?<!redo )\blsn=([0-9A-F]+/[0-9A-F]+)"), str),
    "redo_lsn": (re.compile(r"redo lsn=([0-9A-F]+/[0-9A-F]+)"), str),
}


def log_time(line: str) -> float | None:
    """Epoch seconds of a line that starts with %m or %t, when its time zone is UTC or a
    numeric offset; None otherwise (an abbreviation such as CEST is ambiguous)."""
    match = _TIME.match(line)
    if match is None:
        return None
    stamp, zone = match.group(1), match.group(2)
    if zone is None or zone in _UTC_NAMES:
        tz: timezone = UTC
    elif zone[0] in "+-":
        digits = zone[1:].replace(":", "")
        minutes = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) >= 4 else 0)
        tz = timezone(timedelta(minutes=minutes if zone[0] == "+" else -minutes))
    else:
        return None
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in stamp else "%Y-%m-%d %H:%M:%S"
    return datetime.strptime(stamp, fmt).replace(tzinfo=tz).timestamp()


@dataclass(frozen=True)
class LogEntry:
    """One checkpoint line of the log."""

    kind: str  # "starting" or "complete"
    restartpoint: bool
    wall: float | None  # epoch seconds from the line's prefix, when it has a usable one
    flags: tuple[str, ...] = ()  # why it started: time, wal, immediate, force, wait...
    figures: dict[str, JSONValue] = field(default_factory=dict)


def parse_line(line: str) -> LogEntry | None:
    match = _KIND.search(line)
    if match is None:
        return None
    what, kind, rest = match.groups()
    entry = LogEntry(kind=kind, restartpoint=what == "restartpoint", wall=log_time(line))
    if kind == "starting":
        return replace(entry, flags=tuple(rest.split()))
    figures: dict[str, JSONValue] = {}
    for name, (pattern, cast) in _FIGURES.items():
        found = pattern.search(rest)
        if found:
            figures[name] = cast(found.group(1))
    if "buffers" not in figures:
        return None  # some other message that happens to say "complete:"
    return replace(entry, figures=figures)


@dataclass(frozen=True)
class Seen:
    """A log entry and when, in step seconds, it happened (or was first read); negative for
    one before the step, None when that time is not known."""

    entry: LogEntry
    t: float | None


def pair(seen: list[Seen], step_end: float) -> list[dict[str, JSONValue]]:
    """Checkpoint events from starting/complete lines in order. One that began before the
    step has a negative start_t (None when not known); one still running at the end has
    end_t None. in_step_s is how long it ran within the step."""
    events: list[dict[str, JSONValue]] = []
    open_event: dict[str, JSONValue] | None = None
    for s in seen:
        e = s.entry
        if e.kind == "starting":
            if open_event is not None:  # a start without its end (a crash, an immediate one)
                events.append(open_event)
            open_event = {
                "kind": "restartpoint" if e.restartpoint else "checkpoint",
                "reason": _reason(e.flags),
                "flags": list(e.flags),
                "start_t": None if s.t is None else round(s.t, 3),
                "end_t": None,
            }
        else:
            event = open_event or {
                "kind": "restartpoint" if e.restartpoint else "checkpoint",
                "reason": None,
                "flags": [],
                "start_t": None,
                "end_t": None,
            }
            event["end_t"] = None if s.t is None else round(s.t, 3)
            event.update(e.figures)
            events.append(event)
            open_event = None
    if open_event is not None:
        events.append(open_event)
    for event in events:
        start, end = event["start_t"], event["end_t"]
        began = max(0.0, start) if isinstance(start, float) else 0.0
        event["in_step_s"] = round((end if isinstance(end, float) else step_end) - began, 3)
    return events


def unfinished(lines: list[str]) -> LogEntry | None:
    """The last checkpoint start among `lines` when no completion follows it."""
    last = None
    for line in lines:
        entry = parse_line(line)
        if entry is not None:
            last = entry
    return last if last is not None and last.kind == "starting" else None


def _reason(flags: tuple[str, ...]) -> str | None:
    """What caused it: 'wal' (max_wal_size), 'time' (checkpoint_timeout), 'requested'
    (CHECKPOINT, a backup...), 'shutdown', 'end-of-recovery'."""
    for reason in ("shutdown", "end-of-recovery", "wal", "time"):
        if reason in flags:
            return reason
    return "requested" if "force" in flags or "immediate" in flags else None


class CheckpointSampler(PeriodicSampler):
    """Reads what the server appended to its log since the step started."""

    name = "checkpoints"

    def __init__(self, log_path: Path) -> None:
        super().__init__()
        self.log_path = log_path
        self.ctx: SamplerContext | None = None
        self.offset = 0
        self.partial = b""
        self.seen: list[Seen] = []

    def begin(self, ctx: SamplerContext) -> None:
        self.ctx = ctx
        with self.log_path.open("rb") as log:
            self.offset = log.seek(0, 2)  # only what the step adds...
            log.seek(max(0, self.offset - TAIL_BYTES))
            tail = log.read(self.offset - log.tell())
        # ...and the start of a checkpoint still running when the step began.
        running = unfinished(tail.decode(errors="replace").splitlines())
        if running is not None:
            when = running.wall - ctx.started_wall if running.wall is not None else None
            self.seen.append(Seen(running, when))

    def tick(self, t: float) -> None:
        assert self.ctx is not None
        with self.log_path.open("rb") as log:
            log.seek(self.offset)
            chunk = log.read()
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for raw in lines:
            entry = parse_line(raw.decode(errors="replace"))
            if entry is not None:
                # The line's own time when it has one (exact), else when it was read.
                when = entry.wall - self.ctx.started_wall if entry.wall is not None else t
                self.seen.append(Seen(entry, min(when, t)))

    def result(self) -> SamplerResult:
        end = self.ctx.now() if self.ctx else 0.0
        events = pair(self.seen, end)
        return SamplerResult(events=events, sections={"postgres": {"checkpoints": events}})


def _create(setup: SamplerSetup) -> CheckpointSampler | None:
    target = setup.target
    log = target.server_log_file() if isinstance(target, HasLocalServer) else None
    return CheckpointSampler(log) if log is not None and log.exists() else None


# Every sampled step on a target whose server log howfast captures (samplers/registry.py).
SAMPLER = SamplerPlugin("checkpoints", _create, order=40, sections=("postgres",))
