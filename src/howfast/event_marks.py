"""What happened to one event during a step, as the events layer records it and the load and
the analysis read it (docs/events.md). Times are seconds into the step's load, on the clock
that started it; pure data, stored in a step's `sections["events"]`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from howfast.model import JSONValue


@dataclass(frozen=True)
class EventMark:
    index: int  # 1-based, in the order the events were applied
    text: str  # the event's canonical text: "20s:restart"
    action: str
    at_s: float  # when it was asked for
    applied_s: float | None = None  # when the action began (later than at_s after a slow one)
    back_s: float | None = None  # when the action saw the service answer again
    undone_s: float | None = None  # when a for= window ended (restored)
    verified: bool | None = None  # None: not applied, so not verified
    evidence: Mapping[str, JSONValue] = field(default_factory=dict)
    facts: Mapping[str, JSONValue] = field(default_factory=dict)
    problem: str | None = None  # why not verified
    error: str | None = None  # the action failed
    skipped: bool = False  # an earlier action failed: this one was not applied

    def document(self) -> dict[str, JSONValue]:
        return {
            "index": self.index,
            "text": self.text,
            "action": self.action,
            "at_s": self.at_s,
            "applied_s": self.applied_s,
            "back_s": self.back_s,
            "undone_s": self.undone_s,
            "verified": self.verified,
            "evidence": dict(self.evidence),
            "facts": dict(self.facts),
            "problem": self.problem,
            "error": self.error,
            "skipped": self.skipped,
        }

    @classmethod
    def from_document(cls, doc: Mapping[str, JSONValue]) -> EventMark:
        def number(key: str) -> float | None:
            value = doc.get(key)
            return float(value) if isinstance(value, int | float) else None

        def text(key: str) -> str | None:
            value = doc.get(key)
            return value if isinstance(value, str) else None

        verified = doc.get("verified")
        return cls(
            index=int(doc.get("index") or 0),
            text=str(doc.get("text") or ""),
            action=str(doc.get("action") or ""),
            at_s=number("at_s") or 0.0,
            applied_s=number("applied_s"),
            back_s=number("back_s"),
            undone_s=number("undone_s"),
            verified=verified if isinstance(verified, bool) else None,
            evidence=dict(doc.get("evidence") or {}),
            facts=dict(doc.get("facts") or {}),
            problem=text("problem"),
            error=text("error"),
            skipped=bool(doc.get("skipped")),
        )


def marks_section(marks: Sequence[EventMark]) -> dict[str, JSONValue]:
    """A step's `events` section: {"marks": [mark documents, in order]}."""
    return {"marks": [m.document() for m in marks]}


def marks_from_section(section: JSONValue) -> tuple[EventMark, ...]:
    """The marks of a step's stored `events` section; () when absent."""
    if isinstance(section, Mapping):
        section = section.get("marks")
    if not isinstance(section, Sequence) or isinstance(section, str):
        return ()
    return tuple(EventMark.from_document(doc) for doc in section if isinstance(doc, Mapping))


class EventTimeline(Protocol):
    """What a load sees of its step's events (the events layer's schedule): it starts them
    when its first segment starts, asks whether an event may explain a failure, and collects
    the marks when it ends."""

    def start(self, origin_epoch: float) -> None:
        """The load started at `origin_epoch` (epoch seconds): the events' time 0."""

    def marks(self) -> tuple[EventMark, ...]:
        """The events so far."""

    def finish(self, timeout_s: float) -> tuple[EventMark, ...]:
        """The load ended: undo what is pending, mark what never ran; every event's mark."""

    def cancel(self) -> None:
        """Ctrl-C or an error: stop, undo what is pending."""


def progress_line(mark: EventMark) -> str:
    """What the live view says once an event was applied and verified (or not):
    '3 s: 3s:restart applied (verified)'. No figure of its cost: how long the service was
    gone is measured on the load's commits, known once the step ended, and the progress
    prints it then (the recorded figure, `analysis/events.py` `event_line`); the action's
    own view (when the server answered, its standbys streaming again) is in the mark's
    `back_s` and `facts`."""
    at = f"{mark.applied_s if mark.applied_s is not None else mark.at_s:.0f} s"
    if mark.skipped:
        return f"{at}: {mark.text} {mark.problem or 'not applied'}"
    if mark.error is not None:
        return f"{at}: {mark.text} failed: {mark.error}"
    notes = []
    if mark.verified is True:
        notes.append("verified")
    elif mark.verified is False:
        notes.append(f"NOT verified: {mark.problem}")
    return f"{at}: {mark.text} applied" + (f" ({', '.join(notes)})" if notes else "")
