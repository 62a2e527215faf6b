"""What an event action is given and what it returns (docs/events.md).

An action applies itself to the target (`apply`), then says whether it really happened
(`verify`): the server's pid changed, its log says it recovered, the command exited 0. Both
run in the schedule's thread, one event after another; an exception from `apply` ends the
schedule (the step fails with it), one from `verify` only makes the event unverified.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from howfast.cancel import NEVER, CancelToken
from howfast.eventspec import ActionSyntax, EventSpec
from howfast.model import JSONValue
from howfast.targets.base import Connection, Target


@dataclass(frozen=True)
class EventContext:
    target: Target
    now: Callable[[], float]  # seconds since the load started
    primary: Callable[[], Connection]  # howfast's own connection to the current primary
    scratch: Path  # private: a command's output
    load_s: float  # the load's planned length: a command may run until its end
    cancel: CancelToken = NEVER


@dataclass(frozen=True)
class Applied:
    applied_s: float  # when the action began
    back_s: float | None  # when the action saw the service answer again (None: it never left)
    facts: Mapping[str, JSONValue] = field(default_factory=dict)  # stored: what was done
    # Not stored: what verify() compares with (a log offset...).
    before: Mapping[str, object] = field(default_factory=dict)
    undo: Callable[[], Mapping[str, JSONValue]] | None = None  # for= actions: restores


@dataclass(frozen=True)
class Verified:
    ok: bool
    evidence: Mapping[str, JSONValue] = field(default_factory=dict)
    problem: str | None = None  # why not, when not ok


# What each kind of target is, for messages (targets/kinds/ defines the kinds).
KIND_WORDS = {
    "local": "a directory target",
    "dsn": "an existing server (a postgresql:// URI)",
    "path": "a directory probed with fio only",
    "k8s": "a k8s:// target",
    "cnpg": "a cnpg:// target",
}


class EventAction(ABC):
    """An event action, declared whole by its module: how it is written (`syntax`, which the
    parser, `--event`'s help and the readers of a run get through plugin/events.py), what it
    does (`summary`, its entry in docs/events.md: `docs`), what it needs of a target
    (`requires`, said in words by `needs`), what it does to the primary, and how it is applied
    and verified. Nothing else names it: checks.py and the schedule ask these."""

    syntax: ClassVar[ActionSyntax]
    summary: ClassVar[str] = ""  # one line: what it does
    docs: ClassVar[str] = "docs/events.md"  # its entry: "docs/events.md#restart"
    requires: ClassVar[tuple[type, ...]] = ()  # capabilities (targets/capabilities.py)
    # What `missing` says an action needs, in words.
    needs: ClassVar[str] = "more than this target can do"
    # It acts on the server howfast started (after a failover, the dead old primary).
    on_old_primary: ClassVar[bool] = False
    # It makes another server the primary: the old one is gone for the events after it.
    replaces_primary: ClassVar[bool] = False
    # It can act on a standby that an earlier trial's failover promoted and kept as the
    # primary (--trials): False for what a target does only to the primary it started.
    acts_on_promoted: ClassVar[bool] = True
    # Why its trials (--trials) would not each start from the same state (it leaves the
    # server somewhere howfast does not put it back from between trials); None: they do.
    trials_refusal: ClassVar[str | None] = None
    # Where its for= window ends (`undone_s`, the end of the "during" figures): when its undo
    # has returned (False: partition's undo waits for the standby to stream again, and that
    # wait is part of the outage), or when the undo began (True: an undo that restores at once
    # and then only checks its work, which is no longer the window).
    window_ends_as_undo_begins: ClassVar[bool] = False

    name: ClassVar[str]  # the syntax's, set for each subclass that declares one

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "syntax" in cls.__dict__:
            cls.name = cls.syntax.name

    @property
    def disturbs_service(self) -> bool:
        return self.syntax.disturbs_service

    def missing(self, target: Target) -> str | None:
        """Why this target cannot take the action for want of a capability; None when it has
        them all. Said in words (what the action needs, what kind of target this is), never
        by the capabilities' class names, which mean nothing to a user."""
        if all(isinstance(target, c) for c in self.requires):
            return None
        kind = KIND_WORDS.get(target.kind, f"a {target.kind} target")
        return f"{self.name} needs {self.needs}, and {kind} is not one"

    def refusal(self, target: Target, spec: EventSpec) -> str | None:
        """Beyond capabilities: why this event cannot apply to this target (checked before
        anything starts). None when it can."""
        return None

    @abstractmethod
    def apply(self, ctx: EventContext, spec: EventSpec) -> Applied: ...

    @abstractmethod
    def verify(self, ctx: EventContext, spec: EventSpec, applied: Applied) -> Verified: ...


def standby_named(names: Sequence[str], spec: EventSpec) -> str | None:
    """The standby an event names (`failover=standby_2`), else the first of `names`; None when
    it names one that is not among them, or there is none."""
    if spec.arg is not None:
        return spec.arg if spec.arg in names else None
    return names[0] if names else None
