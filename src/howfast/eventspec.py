"""What happens to a target during a pgbench step: `--event AT:ACTION` and a plan step's
`events` list, parsed and checked, pure (docs/events.md).

    EVENT   := AT ":" ACTION
    AT      := a duration into the step's load: "20s", "1m30s", "0.5s", "0"
    ACTION  := NAME | NAME=VALUE, with ",for=D" when the action lasts a while

Which actions there are is not known here: each action's module declares its `ActionSyntax`
(events/, or a distribution's `howfast.events` entry point), and the parser is given them
(`actions`: name -> syntax). The plug-in layer finds them and calls these functions with
them (plugin/events.py: `event_from_text(text)` and the others without `actions`). The kinds
of value: none, a standby's or a node's name, a latency (a duration), a number of I/O
operations, or a command (ARGV: the rest of the text, split as a POSIX shell splits words,
quotes honoured; never run by a shell).

In a plan an event is that text, or a table: `{at = "20s", action = "restart"}`, or for a
command with exact arguments `{at = "20s", exec = ["touch", "/tmp/a b"]}` (the key is the
command action's name).

`event_from_text`, `event_from_table` and `plan_event` raise ValueError with a message for
the user (the plan loader adds file, line and key); `parse_event` raises UsageError naming
the option. What depends on the step (its length, its other events) is checked by
`step_refusals`; what depends on the target (a standby to fail over to, an emulated volume,
a second node) by the events layer, before anything starts.
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from howfast.errors import UsageError
from howfast.units import plain_number, quote

ArgKind = Literal["none", "standby", "node", "latency", "iops", "argv"]


@dataclass(frozen=True)
class ActionSyntax:
    """How one action is written: what its value is, whether it may or must have one, and
    whether it lasts a while (`for=`). Declared by the action's module (its `EventAction`'s
    `syntax`, events/base.py), never listed here."""

    name: str
    arg: ArgKind = "none"
    arg_required: bool = False
    takes_for: bool = False
    disturbs_service: bool = False  # connections are cut: the load reconnects
    # It may cut them (a user's command may do anything): the load's failures while it runs
    # are not taken for the load's own.
    may_disturb_service: bool = False
    # The server comes back at a new address (a pod made again): the load's own way to it
    # (the name's DNS answer, the nodes' neighbour caches) may follow a few seconds after
    # howfast's own check saw it answer, so the load's failures are its for longer after.
    new_address: bool = False
    # Its place in `--event`'s help and in "actions: ..." messages (lowest first).
    order: int = 100

    @property
    def usage(self) -> str:
        """'failover[=STANDBY]', 'slow-storage=LATENCY[,for=D]'."""
        if self.arg == "none":
            text = self.name
        else:
            value = _ARG_WORDS[self.arg]
            text = f"{self.name}={value}" if self.arg_required else f"{self.name}[={value}]"
        return text + ("[,for=D]" if self.takes_for else "")


_ARG_WORDS: dict[ArgKind, str] = {
    "none": "",
    "standby": "STANDBY",
    "node": "NODE",
    "latency": "LATENCY",
    "iops": "N",
    "argv": "ARGV",
}

Actions = Mapping[str, ActionSyntax]  # the registered actions' syntax, by name


def in_order(actions: Iterable[ActionSyntax]) -> list[ActionSyntax]:
    """By their declared order, then by name."""
    return sorted(actions, key=lambda a: (a.order, a.name))


def grammar(actions: Actions) -> str:
    """What an event is, with every action's form: for messages."""
    usages = ", ".join(a.usage for a in in_order(actions.values()))
    return f"AT:ACTION, e.g. 20s:restart; actions: {usages}"


def event_help(actions: Actions) -> str:
    """`--event`'s help: every action's form, in their order."""
    usages = ", ".join(a.usage for a in in_order(actions.values()))
    return f"During every pgbench step, at AT into its load: {usages} (repeatable; docs/events.md)."


# Names as the targets spell them: a standby ("standby_1"), a Kubernetes node (an RFC 1123
# subdomain, which an IPv4 address also is).
_STANDBY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")
_NODE = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?")
_NUMBER = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"
_PLAIN = re.compile(_NUMBER)  # a plain number: seconds (milliseconds for a latency)
_DURATION_PART = re.compile(rf"({_NUMBER})\s*(ms|s|min|m|h)")
_UNIT_S = {"ms": Fraction(1, 1000), "s": Fraction(1), "m": Fraction(60), "min": Fraction(60),
           "h": Fraction(3600)}  # fmt: skip
_TABLE_KEYS = ("at", "action")  # and the name of each command action ("exec")
# The action's name: everything up to its value, its options or a space (so that "réstart"
# is named whole in the message, not cut at its first letter outside ASCII).
_ACTION_NAME = re.compile(r"\s*([^=,\s]*)")
_DIGITS = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit() takes "²" and "١"

# Times into the step and windows are kept to the microsecond, and at most a year: beyond,
# no step lasts (those within the bound but past the step's end are refused by
# step_refusals, which knows its length).
RESOLUTION_DIGITS = 6
MAX_EVENT_S = 366 * 86400
# The kernel keeps an I/O cgroup's IOPS limit in 32 bits, 2**32 - 1 meaning "no limit"
# (blk-throttle): a larger N would be cut down silently, and the cap read back would differ.
MAX_IOPS = 2**32 - 2


@dataclass(frozen=True)
class EventSpec:
    """One event, as asked. `text` is its canonical spelling (`20s:restart`): the step's
    params keep it, so that two spellings of one event make one test; `given` is how it was
    written, for messages."""

    at_s: float
    action: str  # a registered action's name
    arg: str | None = None  # the standby, the node, "5ms", "200"
    argv: tuple[str, ...] = ()  # a command's (exec)
    for_s: float | None = None  # drain, slow-storage, cap-iops
    given: str = ""
    # What kind of value `arg` is, as the action declares it (the parser sets it; not part
    # of what the event is: its text says that).
    kind: ArgKind = field(default="none", compare=False)

    @property
    def latency_ms(self) -> float | None:
        """A latency action's (slow-storage's) value in milliseconds."""
        if self.kind != "latency" or self.arg is None:
            return None
        return _latency_ms(self.arg)

    @property
    def iops(self) -> int | None:
        """A number action's (cap-iops's) value."""
        return int(self.arg) if self.kind == "iops" and self.arg is not None else None

    @property
    def ends_s(self) -> float | None:
        """When a `for=` window ends, in seconds into the load."""
        return None if self.for_s is None else self.at_s + self.for_s

    @property
    def text(self) -> str:
        value = ""
        if self.argv:
            value = "=" + shlex.join(self.argv)
        elif self.arg is not None:
            value = f"={self.arg}"
        window = f",for={_seconds_text(self.for_s)}s" if self.for_s is not None else ""
        return f"{_seconds_text(self.at_s)}s:{self.action}{value}{window}"


def _seconds_text(value: float) -> str:
    """20.0 -> '20', 0.5 -> '0.5', 1234567.0 -> '1234567': the shortest text that reads back
    as the same number, never in exponent form (the grammar reads none)."""
    return plain_number(value)


# --- parsing ---------------------------------------------------------------------------------


def event_from_text(text: str, actions: Actions) -> EventSpec:
    """An event from `AT:ACTION`; ValueError saying which part is wrong and what is accepted."""
    given = text.strip()
    at_text, colon, action_text = given.partition(":")
    if not colon:
        raise ValueError(f"{quote(given)}: write {grammar(actions)}")
    at_s = _at_seconds(at_text)
    name_match = _ACTION_NAME.match(action_text)
    name = name_match.group(1) if name_match else ""
    tail = action_text[name_match.end() :] if name_match else action_text
    if name not in actions:
        raise ValueError(
            f"{quote(given)}: unknown action {quote(name)}{_guess(name, actions)}; "
            f"write {grammar(actions)}"
        )
    syntax = actions[name]
    if syntax.arg == "argv":
        if not tail.startswith("="):
            raise ValueError(f"{quote(given)}: write {syntax.usage}, the command after the =")
        return _exec_event(given, at_s, syntax, _exec_argv(given, syntax, tail[1:]))
    value_text: str | None
    if tail.startswith("="):
        value_text, *option_texts = tail[1:].split(",")
    elif tail.startswith(","):  # "drain,for=10s" (its value missing: said below)
        value_text, option_texts = None, tail[1:].split(",")
    elif tail.strip():
        raise ValueError(f"{quote(given)}: unexpected {quote(tail.strip())}; write {syntax.usage}")
    else:
        value_text, option_texts = None, []
    for_s = None
    for option in option_texts:
        key, equals, value = option.partition("=")
        if key.strip() != "for" or not equals or not syntax.takes_for:
            what = f"{name} takes no option {quote(option.strip())}"
            raise ValueError(f"{quote(given)}: {what}; write {syntax.usage}")
        if for_s is not None:
            raise ValueError(f"{quote(given)}: for= is given twice")
        for_s = _for_seconds(given, value)
    arg = _action_value(given, syntax, value_text)
    return EventSpec(at_s=at_s, action=name, arg=arg, for_s=for_s, given=given, kind=syntax.arg)


def event_from_table(table: Mapping[str, object], actions: Actions) -> EventSpec:
    """An event from a plan's table: `at` and either `action` (the text after AT:) or a
    command action's name, `exec` (a list of strings, the command's exact arguments)."""
    commands = [a.name for a in in_order(actions.values()) if a.arg == "argv"]
    table_keys = (*_TABLE_KEYS, *commands)
    unknown = sorted(set(table) - set(table_keys))
    if unknown:
        keys = ", ".join(table_keys)
        raise ValueError(f"an event table has no key {quote(unknown[0])}; its keys: {keys}")
    at = table.get("at")
    if at is None:
        raise ValueError('an event table needs "at": the time into the step, e.g. at = "20s"')
    if isinstance(at, bool) or not isinstance(at, str | int | float):
        raise ValueError(f'at = {quote(at)}: write a duration such as "20s"')
    if not isinstance(at, str):
        _check_number_at(at)
    at_text = at if isinstance(at, str) else f"{plain_number(at)}s"
    given_commands = [c for c in commands if c in table]
    if ("action" in table) + len(given_commands) != 1:
        raise ValueError(
            'an event table needs one of "action" (e.g. action = "restart") or "exec" '
            '(a command as a list, e.g. exec = ["touch", "/tmp/mark"])'
        )
    if "action" in table:
        action = table["action"]
        if not isinstance(action, str):
            raise ValueError(f'action = {quote(action)}: write the action as text, e.g. "restart"')
        return event_from_text(f"{at_text}:{action}", actions)
    (command,) = given_commands
    argv = table[command]
    if (
        not isinstance(argv, list)
        or not argv
        or not all(isinstance(a, str) for a in argv)
        or not argv[0]
    ):
        raise ValueError(
            f"{command} = {quote(argv)}: write the command as a non-empty list of strings, "
            f'e.g. {command} = ["touch", "/tmp/mark"]'
        )
    given = f"{at_text}:{command}={shlex.join(argv)}"
    return _exec_event(given, _at_seconds(at_text), actions[command], tuple(argv))


def plan_event(value: object, actions: Actions) -> EventSpec:
    """One item of a plan step's `events` list: a text or a table."""
    if isinstance(value, str):
        return event_from_text(value, actions)
    if isinstance(value, Mapping):
        return event_from_table(value, actions)
    raise ValueError(
        f'{quote(value)}: an event is a text such as "20s:restart" or a table such as '
        '{at = "20s", exec = ["touch", "/tmp/mark"]}'
    )


def parse_event(text: str, actions: Actions, option: str = "--event") -> EventSpec:
    """`--event AT:ACTION`; UsageError naming the option."""
    try:
        return event_from_text(text, actions)
    except ValueError as e:
        raise UsageError(f"{option} {e}") from None


def ordered(specs: Iterable[EventSpec]) -> tuple[EventSpec, ...]:
    """By time into the load; events at the same time keep the order they were given in."""
    return tuple(sorted(specs, key=lambda s: s.at_s))


def _guess(name: str, actions: Actions) -> str:
    """'; did you mean "restart"?' for a name close to an action's, else ''."""
    close = difflib.get_close_matches(name.lower(), list(actions), n=1, cutoff=0.6)
    return f"; did you mean {quote(close[0])}?" if close else ""


def _check_number_at(at: float) -> None:
    """A plan table's `at = 20` (seconds): finite, 0 or more, within the bound."""
    if not math.isfinite(at):
        raise ValueError(f'at = {quote(at)}: write a duration such as "20s" or a number of seconds')
    if at < 0:
        raise ValueError(f"at = {quote(at)}: a time into the step is 0 or more")
    if at > MAX_EVENT_S:
        raise ValueError(f"at = {quote(at)}: {_BOUND}")


_BOUND = f"an event comes at most {MAX_EVENT_S} s (a year) into a step"


def _at_seconds(text: str) -> float:
    stripped = text.strip().lower()
    if stripped.startswith("-"):
        raise ValueError(f"{quote(text.strip())}: a time into the step is 0 or more")
    try:
        exact = _exact_seconds(stripped)
    except ValueError:
        raise ValueError(
            f"{quote(text.strip())} is not a time into the step; write AT as a duration such "
            'as "20s", "1m30s", "0.5s" or "0" (then :ACTION)'
        ) from None
    if exact > MAX_EVENT_S:
        raise ValueError(f"{quote(text.strip())}: {_BOUND}")
    return _kept(exact)


def _exact_seconds(text: str) -> Fraction:
    """Seconds in "20s", "1m30s" (parts in any unit, summed), "1.5" (a plain number), exactly:
    no float noise when parts are summed. ValueError for anything else."""
    if _PLAIN.fullmatch(text):
        return Fraction(text)
    total, position = Fraction(0), 0
    for part in _DURATION_PART.finditer(text):
        if part.start() != position:
            break
        total += Fraction(part.group(1)) * _UNIT_S[part.group(2)]
        position = part.end()
    if position == 0 or position != len(text):
        raise ValueError(f"{quote(text)} is not a duration")
    return total


def _kept(exact: Fraction) -> float:
    """Seconds as kept: to the microsecond, a float whose shortest text reads back the same."""
    return float(round(exact, RESOLUTION_DIGITS))


def _for_seconds(given: str, value: str) -> float:
    try:
        exact = _exact_seconds(value.strip().lower())
    except ValueError:
        raise ValueError(
            f"{quote(given)}: for={value.strip()} is not a duration; write for=D, e.g. for=10s"
        ) from None
    seconds = _kept(exact)
    if seconds <= 0:
        raise ValueError(f"{quote(given)}: for= must be more than zero, e.g. for=10s")
    if exact > MAX_EVENT_S:
        raise ValueError(f"{quote(given)}: a window lasts at most {MAX_EVENT_S} s (a year)")
    return seconds


def _latency_ms(text: str) -> float:
    """Milliseconds in "5ms", "0.002s", "0" (a plain number is seconds, as in every
    duration), exactly: "0.007ms" is 0.007, not 0.007000000000000001."""
    return float(round(_exact_seconds(text.strip().lower()) * 1000, RESOLUTION_DIGITS))


def _action_value(given: str, syntax: ActionSyntax, value: str | None) -> str | None:
    """The action's value, checked; None when it has none."""
    if value is None or not value.strip():
        if syntax.arg_required:
            raise ValueError(f"{quote(given)}: {syntax.name} needs a value; write {syntax.usage}")
        if value is not None:  # "failover="
            raise ValueError(f"{quote(given)}: the value after = is empty; write {syntax.usage}")
        return None
    value = value.strip()
    if syntax.arg == "none":
        raise ValueError(f"{quote(given)}: {syntax.name} takes no value; write {syntax.name}")
    if syntax.arg == "standby" and not _STANDBY.fullmatch(value):
        raise ValueError(
            f"{quote(given)}: {quote(value)} is not a standby's name (letters, digits, _ . -), "
            "e.g. failover=standby_1"
        )
    if syntax.arg == "node" and not _NODE.fullmatch(value):
        raise ValueError(
            f"{quote(given)}: {quote(value)} is not a node's name (lower-case letters, digits, "
            f". and -); write {syntax.usage}"
        )
    if syntax.arg == "latency":
        try:
            ms = _latency_ms(value)
        except ValueError:
            ms = math.nan
        if not math.isfinite(ms) or ms < 0:
            raise ValueError(
                f"{quote(given)}: {quote(value)} is not a latency; write the latency to add "
                f"to every I/O, e.g. {syntax.name}=5ms (0ms for none)"
            )
        return f"{_seconds_text(ms)}ms"
    if syntax.arg == "iops":
        return _iops(given, syntax.name, value)
    return value


def _iops(given: str, name: str, value: str) -> str:
    """cap-iops's N, checked: ASCII digits, above 0, at most MAX_IOPS (its digits counted
    before int() reads them: int() refuses more than 4300)."""
    digits = value.lstrip("0")
    if not _DIGITS.fullmatch(value) or not digits:
        raise ValueError(
            f"{quote(given)}: {quote(value)} is not a number of I/O operations per second; "
            f"write a whole number above 0, e.g. {name}=200"
        )
    if len(digits) > len(str(MAX_IOPS)) or int(digits) > MAX_IOPS:
        raise ValueError(
            f"{quote(given)}: {name} takes at most {MAX_IOPS} (the kernel's I/O cgroup "
            f"keeps an IOPS limit in 32 bits); write a smaller N, e.g. {name}=200"
        )
    return digits


def _exec_argv(given: str, syntax: ActionSyntax, text: str) -> tuple[str, ...]:
    name = syntax.name
    try:
        argv = tuple(shlex.split(text))
    except ValueError as e:  # "No closing quotation"
        raise ValueError(
            f"{quote(given)}: the command after {name}= cannot be split into words ({e}); "
            f"quote with ' or \", or use a plan table: {name} = [...]"
        ) from None
    if not argv or not argv[0]:
        raise ValueError(f"{quote(given)}: {name} needs a command; write {syntax.usage}")
    return argv


def _exec_event(given: str, at_s: float, syntax: ActionSyntax, argv: tuple[str, ...]) -> EventSpec:
    return EventSpec(at_s=at_s, action=syntax.name, argv=argv, given=given, kind=syntax.arg)


# --- checks against the step ------------------------------------------------------------------


def step_refusals(
    specs: Sequence[EventSpec],
    *,
    duration_s: float | None,
    transactions: int | None = None,
    max_added_latency_ms: float | None = None,
) -> list[str]:
    """Why these events cannot run in a step of this length: each reason a sentence, [] when
    they can. A `for=` window must end within the step (a figure "during" is measured whole);
    two windows of one action may not overlap (the first one's end would undo the second)."""
    if not specs:
        return []
    if transactions is not None or duration_s is None:
        return ["events need a duration: -t steps end when their transactions are done"]
    problems = []
    for spec in specs:
        name = spec.text
        if spec.at_s >= duration_s:
            problems.append(f"event {name} is past the end of a {_seconds_text(duration_s)} s step")
        elif spec.ends_s is not None and spec.ends_s > duration_s:
            problems.append(
                f"event {name} ends after the step ({_seconds_text(spec.ends_s)} s of "
                f"{_seconds_text(duration_s)} s): its window must be measured whole"
            )
        latency = spec.latency_ms
        # the emulated volume's bound: plans/model.py's MAX_ADDED_LATENCY_MS, given by the caller
        bound = max_added_latency_ms
        if latency is not None and bound is not None and latency > bound:
            problems.append(
                f"event {name}: an emulated volume adds at most {_seconds_text(bound)} ms"
            )
    windows = sorted((s for s in specs if s.ends_s is not None), key=lambda s: s.at_s)
    for i, first in enumerate(windows):
        for second in windows[i + 1 :]:
            if second.action == first.action and second.at_s < (first.ends_s or 0):
                problems.append(
                    f"events {first.text} and {second.text} overlap: the first one's end "
                    "would undo the second"
                )
    return problems
