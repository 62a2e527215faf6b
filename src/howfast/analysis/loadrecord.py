"""The record of a load that ran through events (pgbench in segments), as a step stores it in
`sections["load"]` and the per-event figures read it (analysis/events.py). Times are seconds
since the load started (`origin_epoch`, the client's clock). Pure data and its JSON form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from howfast.model import JSONValue

BIN_S = 0.1


@dataclass(frozen=True)
class Gap:
    """A stretch without commits: from the last commit before to the first one after. An open
    gap (`closed` false) lasted until the load's end: no commit came after it."""

    t0: float
    t1: float
    closed: bool = True

    @property
    def length(self) -> float:
        return self.t1 - self.t0

    def document(self) -> list[JSONValue]:
        return [round(self.t0, 6), round(self.t1, 6), self.closed]


@dataclass(frozen=True)
class SegmentFacts:
    """One pgbench segment: when it ran, what it acknowledged, which clients it lost where."""

    number: int
    seconds: int  # -T
    started_s: float
    ended_s: float | None  # None: its end was not seen
    returncode: int
    acked: int | None  # "number of transactions actually processed"; None: it never ran
    failed: int = 0  # pgbench's failed transactions (serialization, deadlock)
    aborts: tuple[tuple[int, int], ...] = ()  # (client, command index) of each aborted client
    first_commit_s: float | None = None  # the first and last commit its log holds
    last_commit_s: float | None = None
    connect_error: str | None = None  # why it never ran

    @property
    def ran(self) -> bool:
        return self.acked is not None

    def in_doubt(self, end_command: int | None) -> int:
        """Clients cut while their COMMIT (the script's END) was under way: the commit may or
        may not have happened. 0 when the script's END is not known."""
        if end_command is None:
            return 0
        return sum(1 for _, command in self.aborts if command == end_command)

    @property
    def at_s(self) -> float:
        """Where its commits belong in time: its last commit, else its end, else its start."""
        if self.last_commit_s is not None:
            return self.last_commit_s
        return self.ended_s if self.ended_s is not None else self.started_s

    def document(self) -> dict[str, JSONValue]:
        doc: dict[str, JSONValue] = {
            "number": self.number,
            "seconds": self.seconds,
            "started_s": _round(self.started_s),
            "ended_s": _round(self.ended_s),
            "returncode": self.returncode,
            "acked": self.acked,
            "failed": self.failed,
            "aborts": [list(a) for a in self.aborts],
            "first_commit_s": _round(self.first_commit_s),
            "last_commit_s": _round(self.last_commit_s),
        }
        if self.connect_error is not None:
            doc["connect_error"] = self.connect_error
        return doc

    @classmethod
    def from_document(cls, doc: Mapping[str, JSONValue]) -> SegmentFacts:
        return cls(
            number=int(doc["number"]),
            seconds=int(doc["seconds"]),
            started_s=float(doc["started_s"]),
            ended_s=_float(doc.get("ended_s")),
            returncode=int(doc["returncode"]),
            acked=None if doc.get("acked") is None else int(doc["acked"]),
            failed=int(doc.get("failed") or 0),
            aborts=tuple((int(a[0]), int(a[1])) for a in doc.get("aborts") or ()),
            first_commit_s=_float(doc.get("first_commit_s")),
            last_commit_s=_float(doc.get("last_commit_s")),
            connect_error=doc.get("connect_error"),
        )


@dataclass(frozen=True)
class HistoryCount:
    """pgbench_history rows whose mtime falls in [lo_s, hi_s) of the load (None: unbounded),
    counted after the load on the surviving primary."""

    lo_s: float | None
    hi_s: float | None
    rows: int

    def document(self) -> dict[str, JSONValue]:
        return {"lo_s": _round(self.lo_s), "hi_s": _round(self.hi_s), "rows": self.rows}

    @classmethod
    def from_document(cls, doc: Mapping[str, JSONValue]) -> HistoryCount:
        return cls(_float(doc.get("lo_s")), _float(doc.get("hi_s")), int(doc["rows"]))


@dataclass(frozen=True)
class LoadRecord:
    origin_epoch: float
    end_s: float  # when the last segment ended
    segments: tuple[SegmentFacts, ...]
    gaps: tuple[Gap, ...] = ()
    interval_ms: float | None = None  # median spacing of logged commits: the gaps' resolution
    sampling: float | None = None  # the log's sampling rate (None: every transaction)
    end_command: int | None = None  # index of the script's END (in-doubt commits); None: unknown
    # None when commits are counted, else why not ("select-only commits nothing")
    not_counted: str | None = None
    history: tuple[HistoryCount, ...] = field(default_factory=tuple)
    # Logged commits per BIN_S from the origin (not scaled by the sampling rate): TPS over any
    # window to a tenth of a second, the resolution of the recovery and of the retries.
    commit_bins: tuple[int, ...] = ()

    def tps(self, lo_s: float, hi_s: float) -> float | None:
        """Commits per second in [lo_s, hi_s), both rounded to bins; scaled up from a sampled
        log. None for an empty window or one past the recorded bins."""
        a, b = round(lo_s / BIN_S), round(hi_s / BIN_S)
        if b <= a or a < 0 or b > len(self.commit_bins):
            return None
        scale = 1 / self.sampling if self.sampling else 1.0
        return sum(self.commit_bins[a:b]) * scale / ((b - a) * BIN_S)

    @property
    def acked(self) -> int:
        return sum(s.acked or 0 for s in self.segments)

    @property
    def failed_connects(self) -> int:
        return sum(1 for s in self.segments if not s.ran)

    @property
    def aborted_clients(self) -> int:
        return sum(len(s.aborts) for s in self.segments)

    def document(self) -> dict[str, JSONValue]:
        return {
            "origin_epoch": self.origin_epoch,
            "end_s": _round(self.end_s),
            "segments": [s.document() for s in self.segments],
            "gaps": [g.document() for g in self.gaps],
            "interval_ms": _round(self.interval_ms),
            "sampling": self.sampling,
            "end_command": self.end_command,
            "not_counted": self.not_counted,
            "history": [h.document() for h in self.history],
            "bin_s": BIN_S,
            "commit_bins": list(self.commit_bins),
        }

    @classmethod
    def from_document(cls, doc: Mapping[str, JSONValue]) -> LoadRecord:
        return cls(
            origin_epoch=float(doc["origin_epoch"]),
            end_s=float(doc["end_s"]),
            segments=tuple(SegmentFacts.from_document(s) for s in doc.get("segments") or ()),
            gaps=tuple(Gap(float(g[0]), float(g[1]), bool(g[2])) for g in doc.get("gaps") or ()),
            interval_ms=_float(doc.get("interval_ms")),
            sampling=_float(doc.get("sampling")),
            end_command=None if doc.get("end_command") is None else int(doc["end_command"]),
            not_counted=doc.get("not_counted"),
            history=tuple(HistoryCount.from_document(h) for h in doc.get("history") or ()),
            commit_bins=tuple(int(n) for n in doc.get("commit_bins") or ()),
        )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _float(value: JSONValue) -> float | None:
    return float(value) if isinstance(value, int | float) else None
