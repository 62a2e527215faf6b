"""Finding, reading and validating plan files, with errors that point at a file and line.

tomllib returns plain dicts without positions, so `key_lines` scans the text once more to learn
on which line each key, table header and array element is written. It only has to understand
TOML that tomllib has already accepted.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import difflib
import json
import re
import tomllib
from collections.abc import Callable, Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from howfast.errors import PlanError
from howfast.plans.model import STEP_MODELS, Plan

KeyPath = tuple[str | int, ...]

# ---------------------------------------------------------------------------------------------
# Built-in plans: TOML files shipped inside the package.


def _builtin_dir() -> Traversable:
    return resources.files("howfast.plans").joinpath("builtin")


def builtin_plan_names() -> list[str]:
    files = (p.name for p in _builtin_dir().iterdir() if p.is_file())
    return sorted(f.removesuffix(".toml") for f in files if f.endswith(".toml"))


def _builtin_hint() -> str:
    return f"built-in plans: {', '.join(builtin_plan_names())}; or give the path of a .toml file"


def builtin_plan_text(name: str) -> str:
    """The TOML of a built-in plan, comments included: a starting point for one's own."""
    if name not in builtin_plan_names():
        raise _unknown_plan(name)
    return _builtin_dir().joinpath(f"{name}.toml").read_text(encoding="utf-8")


def list_builtin_plans() -> list[tuple[str, str]]:
    """(name, description) of each built-in plan, by name."""
    return [(name, load_plan(name).description) for name in builtin_plan_names()]


def _unknown_plan(name: str) -> PlanError:
    close = difflib.get_close_matches(name, builtin_plan_names(), n=1)
    guess = f"; did you mean {_toml(close[0])}?" if close else ""
    return PlanError(f"unknown plan {_toml(name)}{guess}", hint=_builtin_hint())


# ---------------------------------------------------------------------------------------------
# Loading.


def load_plan(name_or_path: str) -> Plan:
    """A built-in plan by name, or a plan file by path. PlanError says what is wrong and where.

    A built-in name wins over a file of the same name in the current directory; write
    `./quick` for the file.
    """
    if name_or_path in builtin_plan_names():
        return parse_plan(builtin_plan_text(name_or_path), source=f"{name_or_path}.toml")
    if not name_or_path:
        raise _unknown_plan(name_or_path)
    path = Path(name_or_path)
    looks_like_path = "/" in name_or_path or path.suffix == ".toml" or path.exists()
    if not looks_like_path:
        raise _unknown_plan(name_or_path)
    if not path.is_file():
        raise PlanError(f"no such plan file: {name_or_path}", hint=_builtin_hint())
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PlanError(f"cannot read plan file {name_or_path}: {e}") from None
    return parse_plan(text, source=name_or_path, base_dir=path.parent)


def parse_plan(text: str, *, source: str, base_dir: Path | None = None) -> Plan:
    """Validate plan TOML. `source` names the file in messages and, by its stem, the plan;
    `base_dir` is where relative script paths start (None: keep them as written)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PlanError(_toml_error(source, str(e), text)) from None
    try:
        plan = Plan.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as e:
        raise PlanError("\n".join(validation_messages(e, text, source))) from None
    if not plan.name:
        plan = plan.model_copy(update={"name": Path(source).stem})
    return plan


_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _toml_error(source: str, message: str, text: str = "") -> str:
    """tomllib's `reason (at line L, column C)` as `file:L: invalid TOML: reason (column C)`;
    a key set twice is named, with the line that set it first."""
    match = _TOML_POSITION.search(message)
    if match is None:
        reason = message.replace(" (at end of document)", "")
        return f"{source}: invalid TOML: {reason} (at the end of the file)"
    reason = message[: match.start()]
    line = int(match.group(1))
    if reason.startswith("Cannot overwrite a value"):
        found = overwritten_key(text, line)
        if found is not None:
            path, first = found
            where = "earlier on the same line" if first == line else f"first on line {first}"
            return (
                f"{source}:{line}: invalid TOML: {format_path(path)} is set twice ({where}); "
                "keep one"
            )
    declared = _DECLARED_TWICE.match(reason)
    if declared is not None:
        with contextlib.suppress(ValueError, SyntaxError):
            table = tuple(ast.literal_eval(declared[1]))
            header = key_lines(text).get(table)
            where = f" (first on line {header})" if header not in (None, line) else ""
            return (
                f"{source}:{line}: invalid TOML: table [{format_path(table)}] is declared "
                f"twice{where}; keep one"
            )
    return f"{source}:{line}: invalid TOML: {reason} (column {match.group(2)})"


_DECLARED_TWICE = re.compile(r"Cannot declare (\(.*\)) twice")


def overwritten_key(text: str, line: int) -> tuple[KeyPath, int] | None:
    """The key set on `line` over a value set before (the key itself, a table it is in, or a
    key inside it), and the line of that first value."""
    scanner = _KeyScanner(text)
    scanner.scan()
    for index, (path, at) in enumerate(scanner.assigned):
        if at != line:
            continue
        for earlier, first in scanner.assigned[:index]:
            shorter = min(len(path), len(earlier))
            if path[:shorter] == earlier[:shorter]:
                return earlier if len(earlier) < len(path) else path, first
    return None


# ---------------------------------------------------------------------------------------------
# Validation errors -> one line each: `file:line: key.path: reason`.


def validation_messages(error: ValidationError, text: str, source: str) -> list[str]:
    lines = key_lines(text)
    found = []
    for details in error.errors():
        path, reason = _explain(details)
        line = line_of(lines, path)
        where = f"{source}:{line}" if line is not None else source
        key = format_path(path)
        found.append((line or 0, f"{where}: {key}: {reason}" if key else f"{where}: {reason}"))
    found.sort(key=lambda item: item[0])  # stable: same-line errors keep pydantic's order
    return [message for _, message in found]


def _explain(details: ErrorDetails) -> tuple[KeyPath, str]:
    """The key path as the user wrote it, and the reason in the user's terms."""
    raw_loc = details["loc"]
    workload = _workload_in(raw_loc)
    path: KeyPath = tuple(
        part for i, part in enumerate(raw_loc) if part != "[key]" and not (i == 2 and workload)
    )
    kind = details["type"]
    ctx: dict[str, Any] = dict(details.get("ctx") or {})
    value = details["input"]
    if kind == "extra_forbidden":
        return path, _unknown_key(str(path[-1]), workload)
    if kind == "missing":
        return path, "missing required key"
    if kind == "union_tag_not_found":
        return path, f"missing key workload (one of {_choices(STEP_MODELS)})"
    if kind == "union_tag_invalid":
        tag = str(ctx.get("tag"))
        return (*path, "workload"), f"unknown workload {_toml(tag)}" + _suggest(
            tag, STEP_MODELS, _toml
        )
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        reason = f"{_toml(value)} is not one of {_choices(allowed)}"
        return path, reason + (
            _suggest(value, allowed, quote=_toml) if isinstance(value, str) else ""
        )
    if kind == "plan_conflict":
        key = ctx.get("key")
        return ((*path, key) if key else path), details["msg"]
    if kind == "value_error":
        return path, details["msg"].removeprefix("Value error, ")
    if kind in _REASONS:
        # Bounds as written: 0, not the 0.0 a float field's constraint carries.
        bounds = {
            k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in ctx.items()
        }
        reason = _REASONS[kind].format(**bounds)
    else:
        reason = details["msg"][:1].lower() + details["msg"][1:]
    if not isinstance(value, dict | list):
        reason += f", got {_toml(value)}"
    return path, reason


# Pydantic's reasons in the words of a configuration file.
_REASONS = {
    "greater_than_equal": "must be {ge} or more",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be {le} or less",
    "too_short": "must not be empty",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "string_type": "must be a string (in quotes)",
    "bool_type": "must be true or false",
    "list_type": "must be a list, in [brackets]",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
}


def _workload_in(loc: tuple[int | str, ...]) -> str | None:
    """The discriminator pydantic puts in a step's error location: steps.<i>.<workload>...."""
    if len(loc) > 2 and loc[0] == "steps" and isinstance(loc[1], int) and loc[2] in STEP_MODELS:
        return str(loc[2])
    return None


def _unknown_key(key: str, workload: str | None) -> str:
    fields = STEP_MODELS[workload].model_fields if workload else Plan.model_fields
    reason = f"unknown key for a {workload} step" if workload else "unknown key"
    guess = _suggest(key, fields)
    if not guess:
        owners = [w for w, model in STEP_MODELS.items() if key in model.model_fields]
        if owners:
            guess = f" ({key} belongs to {' and '.join(owners)} steps)"
    return reason + guess


def _suggest(word: object, choices: Iterable[str], quote: Callable[[object], str] = repr) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1)
    return f"; did you mean {quote(close[0])}?" if close else ""


def _choices(values: Iterable[str]) -> str:
    return ", ".join(_toml(v) for v in values)


def _toml(value: object) -> str:
    """A value as it would be written in TOML, for messages."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def format_path(path: KeyPath) -> str:
    """("steps", 2, "clients", 0) -> "steps[2].clients[0]"; keys that need quotes get them."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if _BARE_KEY.fullmatch(part) else json.dumps(part)
            out += f".{name}" if out else name
    return out


# ---------------------------------------------------------------------------------------------
# Where keys are written.


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of `path`, else of its nearest written ancestor (a missing key: its table).

    A key with dots, such as a setting `auto_explain.log_min_duration`, may be written as
    one quoted key or as a dotted key; both spellings are tried.
    """
    dotted: KeyPath = tuple(
        piece for part in path for piece in (part.split(".") if isinstance(part, str) else [part])
    )
    for candidate in (path, dotted):
        if candidate in lines:
            return lines[candidate]
    for end in range(len(path) - 1, 0, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None


def key_lines(text: str) -> dict[KeyPath, int]:
    """Map each key path to the (1-based) line where it is written.

    Covers `[table]` and `[[array.of.tables]]` headers (each entry gets its index, as in
    `("steps", 1)`), `key = value` and dotted keys, keys of inline tables, and the elements of
    arrays (`("clients", 2)`), which matters for arrays spread over several lines.
    """
    return _KeyScanner(text).scan()


class _KeyScanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.newlines = [i for i, c in enumerate(text) if c == "\n"]
        self.lines: dict[KeyPath, int] = {}
        self.table: KeyPath = ()
        self.entries: dict[KeyPath, int] = {}  # array of tables -> entries seen so far
        self.assigned: list[tuple[KeyPath, int]] = []  # every `key = value`, in order

    def scan(self) -> dict[KeyPath, int]:
        while True:
            self._skip(newlines=True)
            if self.pos >= len(self.text):
                return self.lines
            start = self.pos
            if self.text.startswith("[[", self.pos):
                self._array_header()
            elif self._peek() == "[":
                self._table_header()
            else:
                self._key_value(self.table)
            if self.pos == start:  # never loop on text this scanner does not understand
                self.pos += 1

    # -- low-level -------------------------------------------------------------------------

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _line(self) -> int:
        return bisect.bisect_left(self.newlines, self.pos) + 1

    def _record(self, path: KeyPath) -> None:
        self.lines.setdefault(path, self._line())

    def _skip(self, *, newlines: bool) -> None:
        """Skip spaces, tabs and comments, and line ends too if `newlines`."""
        blanks = " \t\r\n" if newlines else " \t"
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c in blanks:
                self.pos += 1
            elif c == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                return

    def _expect(self, token: str) -> None:
        self._skip(newlines=False)
        if self.text.startswith(token, self.pos):
            self.pos += len(token)

    # -- keys and headers ------------------------------------------------------------------

    def _key(self) -> list[str]:
        """A key, dotted or not: `a`, `a.b`, `"a.b"`, `'x' . y`."""
        parts = []
        while True:
            self._skip(newlines=False)
            c = self._peek()
            if c in "\"'":
                start = self.pos
                self._string()
                parts.append(self._decode_quoted(self.text[start : self.pos]))
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if match is None:
                    return parts
                parts.append(match.group())
                self.pos = match.end()
            self._skip(newlines=False)
            if self._peek() != ".":
                return parts
            self.pos += 1

    @staticmethod
    def _decode_quoted(raw: str) -> str:
        try:  # tomllib knows every escape; let it decode the key
            return str(tomllib.loads(f"k = {raw}")["k"])
        except tomllib.TOMLDecodeError:
            return raw.strip("\"'")

    def _resolve(self, key: list[str]) -> KeyPath:
        """A header's key as a path, entering the latest entry of each array of tables."""
        path: KeyPath = ()
        for part in key:
            path = (*path, part)
            if path in self.entries:
                path = (*path, self.entries[path] - 1)
        return path

    def _table_header(self) -> None:
        line = self._line()
        self.pos += 1
        self.table = self._resolve(self._key())
        self._expect("]")
        self.lines.setdefault(self.table, line)

    def _array_header(self) -> None:
        line = self._line()
        self.pos += 2
        key = self._key()
        self._expect("]]")
        array = (*self._resolve(key[:-1]), *key[-1:])
        index = self.entries.get(array, 0)
        self.entries[array] = index + 1
        self.lines.setdefault(array, line)
        self.table = (*array, index)
        self.lines[self.table] = line

    def _key_value(self, base: KeyPath) -> None:
        line = self._line()
        key = self._key()
        if not key:
            return
        for end in range(1, len(key) + 1):  # a.b.c = 1 also writes tables a and a.b
            self.lines.setdefault((*base, *key[:end]), line)
        self.assigned.append(((*base, *key), line))
        self._expect("=")
        self._skip(newlines=False)
        self._value((*base, *key))

    # -- values ----------------------------------------------------------------------------

    def _value(self, path: KeyPath) -> None:
        c = self._peek()
        if c in "\"'":
            self._string()
        elif c == "[":
            self._array(path)
        elif c == "{":
            self._inline_table(path)
        else:  # number, boolean, date: runs until a separator
            while self._peek() not in ("", ",", "]", "}", "\n", "#"):
                self.pos += 1

    def _string(self) -> None:
        quote = self._peek()
        triple = quote * 3
        if self.text.startswith(triple, self.pos):
            self.pos += 3
            while self.pos < len(self.text) and not self.text.startswith(triple, self.pos):
                self.pos += 2 if quote == '"' and self._peek() == "\\" else 1
            self.pos += 3
            while self._peek() == quote:  # up to two quotes may end the content
                self.pos += 1
            return
        self.pos += 1
        while self.pos < len(self.text) and self._peek() not in (quote, "\n"):
            self.pos += 2 if quote == '"' and self._peek() == "\\" else 1
        self.pos += 1

    def _array(self, path: KeyPath) -> None:
        self.pos += 1
        index = 0
        while True:
            self._skip(newlines=True)
            if self._peek() in ("]", ""):
                self.pos += 1
                return
            self._record((*path, index))
            start = self.pos
            self._value((*path, index))
            self._skip(newlines=True)
            if self._peek() == ",":
                self.pos += 1
                index += 1
            elif self.pos == start:
                self.pos += 1

    def _inline_table(self, path: KeyPath) -> None:
        self.pos += 1
        while True:
            self._skip(newlines=True)
            if self._peek() in ("}", ""):
                self.pos += 1
                return
            start = self.pos
            self._key_value(path)
            self._skip(newlines=True)
            if self._peek() == "," or self.pos == start:  # the latter: never loop in place
                self.pos += 1


# ---------------------------------------------------------------------------------------------
# Where each setting of a plan is written, for checks made after loading (the server's own).


def setting_locations(name_or_path: str, plan: Plan) -> list[tuple[str, str, str]]:
    """(name, value, `file:line: key`) for the plan's [settings] and every step's `settings`."""
    if name_or_path in builtin_plan_names():
        source, text = f"{name_or_path}.toml", builtin_plan_text(name_or_path)
    else:
        source = name_or_path
        try:
            text = Path(name_or_path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
    lines = key_lines(text)
    found: list[tuple[KeyPath, str, str]] = [
        (("settings", name), name, value) for name, value in plan.settings.items()
    ]
    for index, step in enumerate(plan.steps):
        for name, value in (getattr(step, "settings", None) or {}).items():
            found.append((("steps", index, "settings", name), name, value))
    located = []
    for path, name, value in found:
        line = line_of(lines, path)
        where = f"{source}:{line}" if line is not None else source
        located.append((name, value, f"{where}: {format_path(path)}"))
    return located
