"""What a plan file may say: the schema of each step, the value types (durations, sizes,
setting names) and the command-line overrides.

The models are strict (a TOML string is not silently an integer) and forbid unknown keys, so
that a typo in a plan is an error instead of a default quietly taking its place. Cross-field
checks raise `plan_conflict` errors whose context names the key to point at, so that the loader
can show the line where that key is written.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from howfast.errors import UsageError
from howfast.sizing import REGIMES

_T = TypeVar("_T")

PGBENCH_MODES: tuple[str, ...] = ("select-only", "tpcb-like", "simple-update")
Mode = Literal["select-only", "tpcb-like", "simple-update"]

# ---------------------------------------------------------------------------------------------
# Value parsers. Each raises ValueError with a message written for the user; the plan models
# show it as the reason, the CLI helpers at the bottom turn it into a UsageError.

_NUMBER_UNIT = re.compile(r"([-+]?(?:\d+(?:\.\d+)?|\.\d+))\s*([a-z]*)")
_DURATION_UNITS: dict[str, Fraction] = {
    "ms": Fraction(1, 1000),
    "": Fraction(1),
    "s": Fraction(1),
    "m": Fraction(60),
    "min": Fraction(60),
    "h": Fraction(3600),
}
# Binary multiples throughout: PostgreSQL's "MB" and fio's "M" both mean 2**20 bytes.
_SIZE_UNITS: dict[str, int] = {"": 1, "b": 1}
for _power, _letter in enumerate("kmgt", start=1):
    for _suffix in (_letter, _letter + "b", _letter + "ib"):
        _SIZE_UNITS[_suffix] = 1024**_power

_DURATION_EXAMPLES = '"500ms", "10s", "2m", "1h" or a number of seconds'
_SIZE_EXAMPLES = '"64MiB", "1GiB", "512kB" or a number of bytes'


def _q(value: object) -> str:
    """A value quoted as TOML would write it: "10x", 5."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def duration_seconds(value: object) -> float:
    """Seconds in a positive duration: "500ms", "10s", "2m", "1h", or a number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a duration such as {_DURATION_EXAMPLES}")
    if isinstance(value, str):
        match = _NUMBER_UNIT.fullmatch(value.strip().lower())
        if match is None or match.group(2) not in _DURATION_UNITS:
            raise ValueError(f"{_q(value)} is not a duration; write {_DURATION_EXAMPLES}")
        seconds = float(Fraction(match.group(1)) * _DURATION_UNITS[match.group(2)])
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a duration must be more than zero, got {_q(value)}")
    return seconds


def size_bytes(value: object) -> int:
    """Bytes in a positive size: "64MiB", "1GiB", "512kB" (all binary multiples), or bytes."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected a size such as {_SIZE_EXAMPLES}")
    if isinstance(value, str):
        match = _NUMBER_UNIT.fullmatch(value.strip().lower())
        if match is None or match.group(2) not in _SIZE_UNITS:
            raise ValueError(f"{_q(value)} is not a size; write {_SIZE_EXAMPLES}")
        exact = Fraction(match.group(1)) * _SIZE_UNITS[match.group(2)]
        if exact.denominator != 1:
            raise ValueError(f"{_q(value)} is not a whole number of bytes")
        size = int(exact)
    else:
        size = value
    if size <= 0:
        raise ValueError(f"a size must be more than zero, got {_q(value)}")
    return size


_GUC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


# Settings howfast decides for the servers it creates, and why a plan may not change them.
RESERVED_SETTINGS = {
    "listen_addresses": "howfast's servers listen on a private unix socket only, never on the "
    "network",
    "unix_socket_directories": "howfast connects through the socket in its private run directory",
    "logging_collector": "howfast reads the server log it captures (checkpoints, failures); "
    "the collector would write it into the data directory, on the storage under test",
    "data_directory": "the data directory is the one howfast creates",
    "config_file": "the configuration is the one howfast writes",
    "hba_file": "authentication is the one initdb set up for howfast's own user",
    "ident_file": "authentication is the one initdb set up for howfast's own user",
}


def setting_name(name: str) -> str:
    """A PostgreSQL setting (GUC) name, lower-cased as PostgreSQL itself treats it; one that
    howfast reserves is refused with the reason."""
    if not _GUC_NAME.fullmatch(name):
        raise ValueError(
            f"{_q(name)} is not a PostgreSQL setting name "
            "(letters, digits and underscores, with dots for extension settings)"
        )
    reason = RESERVED_SETTINGS.get(name.lower())
    if reason:
        raise ValueError(f"{_q(name)} cannot be set: {reason}")
    return name.lower()


def setting_value(value: object) -> str:
    """A setting's value as postgresql.conf spells it. Booleans become on/off."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        raise ValueError("a setting's value must be a string, number or boolean")
    # A newline would start a new line in postgresql.conf: refuse it rather than escape it.
    if _CONTROL_CHARS.search(value):
        raise ValueError("a setting's value must not contain newlines or control characters")
    return value


def _flatten_settings(raw: object) -> object:
    """Let `auto_explain.log_min_duration = "1s"` (a nested table in TOML) mean the setting."""
    if not isinstance(raw, dict):
        return raw  # pydantic reports the wrong type
    flat: dict[str, object] = {}
    seen: dict[str, str] = {}

    def walk(prefix: str, table: dict[str, object]) -> None:
        for key, value in table.items():
            name = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict):
                walk(name, value)
                continue
            if name.lower() in seen:
                raise ValueError(f"{_q(seen[name.lower()])} and {_q(name)} are the same setting")
            seen[name.lower()] = name
            flat[name] = value

    walk("", raw)
    return flat


def _conflict(key: str | None, message: str) -> PydanticCustomError:
    """A cross-field error; `key` is the key the loader points at (None: the step itself)."""
    return PydanticCustomError("plan_conflict", message, {"key": key})


def _no_duplicates(values: list[_T]) -> list[_T]:
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"listed more than once: {', '.join(repeated)}")
    return values


def _one_or_list(value: object) -> object:
    """`clients = 4` is read as `clients = [4]`."""
    return [value] if isinstance(value, int) and not isinstance(value, bool) else value


# ---------------------------------------------------------------------------------------------
# Field types.

PositiveInt = Annotated[int, Field(ge=1)]
Duration = Annotated[float, BeforeValidator(duration_seconds)]
Size = Annotated[int, BeforeValidator(size_bytes)]
SettingName = Annotated[str, AfterValidator(setting_name)]
SettingValue = Annotated[str, BeforeValidator(setting_value)]
Settings = Annotated[dict[SettingName, SettingValue], BeforeValidator(_flatten_settings)]

# Options that a plan key controls; in extra_args they would contradict the recorded params.
_INIT_OWNED = {
    "-i": "workload",
    "--initialize": "workload",
    "-s": "scale",
    "--scale": "scale",
    "-F": "fillfactor",
    "--fillfactor": "fillfactor",
    "--partitions": "partitions",
    "--partition-method": "partition_method",
}
_PGBENCH_OWNED = {
    "-c": "clients",
    "--client": "clients",
    "-j": "jobs",
    "--jobs": "jobs",
    "-T": "duration",
    "--time": "duration",
    "-t": "transactions",
    "--transactions": "transactions",
    "-R": "rate",
    "--rate": "rate",
    "-L": "latency_limit",
    "--latency-limit": "latency_limit",
    "-M": "protocol",
    "--protocol": "protocol",
    "-b": "modes",
    "--builtin": "modes",
    "-S": "modes",
    "--select-only": "modes",
    "-N": "modes",
    "--skip-some-updates": "modes",
    "-f": "scripts",
    "--file": "scripts",
    "-s": "scale (of the pgbench-init step)",
    "--scale": "scale (of the pgbench-init step)",
}
# Where to connect is the target's business, for every workload.
_CONNECTION = ("-h", "--host", "-p", "--port", "-U", "--username")


def _sets_option(arg: str, option: str) -> bool:
    """Whether `arg` is `option`, with its value attached or not (`-c8`, `--client=8`)."""
    if option.startswith("--"):
        return arg == option or arg.startswith(option + "=")
    return arg.startswith(option) and not arg.startswith("--")


def _check_arg(arg: str, owned: dict[str, str]) -> str:
    if not arg:
        raise ValueError("an empty argument")
    for option, key in owned.items():
        if _sets_option(arg, option):
            raise ValueError(f"{_q(arg)} is set by the plan key {key}; use that instead")
    if any(_sets_option(arg, option) for option in _CONNECTION):
        raise ValueError(f"{_q(arg)}: where to connect is set by the target (--target)")
    return arg


def _init_arg(arg: str) -> str:
    return _check_arg(arg, _INIT_OWNED)


def _pgbench_arg(arg: str) -> str:
    return _check_arg(arg, _PGBENCH_OWNED)


def _script(value: str, info: ValidationInfo) -> str:
    """`path[@weight]`; a relative path is relative to the plan file."""
    path, at, weight = value.rpartition("@") if "@" in value else (value, "", "")
    if at and not (weight.isascii() and weight.isdigit() and int(weight) >= 1):
        raise ValueError(
            f"the weight after @ must be a whole number of at least 1, got {_q(weight)}"
        )
    if not path:
        raise ValueError("a script needs a file name")
    base_dir = info.context.get("base_dir") if isinstance(info.context, dict) else None
    if isinstance(base_dir, Path):
        resolved = (base_dir / path).resolve()
        if not resolved.is_file():
            raise ValueError(f"no such script file: {resolved}")
        path = str(resolved)
    return f"{path}@{weight}" if at else path


_PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def _profile_name(name: str) -> str:
    if not _PROFILE_NAME.fullmatch(name):
        raise ValueError(
            f"{_q(name)} is not a fio profile name (lower-case letters, digits, - and _)"
        )
    return name


InitArg = Annotated[str, AfterValidator(_init_arg)]
PgbenchArg = Annotated[str, AfterValidator(_pgbench_arg)]
Script = Annotated[str, AfterValidator(_script)]
ProfileName = Annotated[str, AfterValidator(_profile_name)]
ClientList = Annotated[list[PositiveInt], BeforeValidator(_one_or_list), Field(min_length=1)]


def _whole_seconds(seconds: float) -> float:
    if seconds != int(seconds):
        raise ValueError(f"must be whole seconds, got {seconds:g}s")
    return seconds


def dataset_value(value: str) -> str:
    """A working-set regime (in-buffers, in-memory, on-disk) or a size such as "20GiB"."""
    if value in REGIMES:
        return value
    try:
        size_bytes(value)
    except ValueError:
        raise ValueError(
            f"{_q(value)}: expected {', '.join(REGIMES)} or a size such as 20GiB"
        ) from None
    return value


# ---------------------------------------------------------------------------------------------
# Steps: one model per workload, told apart by the `workload` key.


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PgbenchInitStep(_Step):
    """`pgbench --initialize`: create and load the pgbench tables."""

    workload: Literal["pgbench-init"]
    scale: PositiveInt | None = None
    # A working-set regime or a size: the scale is then computed on the target (sizing.py)
    dataset: Annotated[str, AfterValidator(dataset_value)] | None = None
    generate: Literal["client", "server"] = "client"
    fillfactor: int = Field(default=100, ge=10, le=100)
    partitions: int = Field(default=0, ge=0)
    partition_method: Literal["range", "hash"] = "range"
    extra_args: list[InitArg] = []

    @model_validator(mode="after")
    def _partition_method_needs_partitions(self) -> Self:
        if "partition_method" in self.model_fields_set and self.partitions == 0:
            raise _conflict("partition_method", "partition_method needs partitions of 1 or more")
        return self

    @model_validator(mode="after")
    def _scale_or_dataset(self) -> Self:
        if self.scale is not None and self.dataset is not None:
            raise _conflict("dataset", "give scale or dataset, not both")
        if self.scale is None and self.dataset is None:
            raise _conflict(None, "missing scale (or dataset): how much data to load")
        return self


class PgbenchStep(_Step):
    """`pgbench`: built-in modes or custom scripts, for each client count in turn."""

    workload: Literal["pgbench"]
    modes: Annotated[list[Mode], Field(min_length=1)] | None = None
    scripts: Annotated[list[Script], Field(min_length=1)] | None = None
    clients: ClientList
    jobs: PositiveInt | None = None
    duration: Duration | None = None
    transactions: PositiveInt | None = None
    rate: float | None = Field(default=None, gt=0)
    latency_limit: Duration | None = None
    protocol: Literal["simple", "extended", "prepared"] | None = None
    extra_args: list[PgbenchArg] = []
    # postgresql.conf settings for these runs only, over the plan's [settings] and --set
    settings: Settings = {}
    # A run of this long before each mode's measurements, stored and left out of statistics
    warmup: Duration | None = None
    # Latency under load: fixed offered rates (transactions/s), or fractions of the maximum
    # TPS that a full-speed run measures first; and a latency objective such as "p99=10ms".
    rates: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1)] | None = None
    rate_fractions: (
        Annotated[list[Annotated[float, Field(gt=0, le=10)]], Field(min_length=1)] | None
    ) = None
    slo: str | None = None

    @field_validator("slo")
    @classmethod
    def _valid_slo(cls, text: str | None) -> str | None:
        if text is None:
            return None
        from howfast.analysis.latency_curve import parse_slo

        try:
            return parse_slo(text).text
        except UsageError as e:
            raise ValueError(e.message.replace("--slo ", "")) from None

    @field_validator("modes", "clients")
    @classmethod
    def _distinct(cls, values: list[Any] | None) -> list[Any] | None:
        return None if values is None else _no_duplicates(values)

    @field_validator("duration", "warmup")
    @classmethod
    def _duration_in_seconds(cls, seconds: float | None) -> float | None:
        # pgbench -T takes whole seconds.
        return None if seconds is None else _whole_seconds(seconds)

    @model_validator(mode="after")
    def _one_of_each_pair(self) -> Self:
        problems: list[tuple[str | None, str]] = []
        if self.modes is not None and self.scripts is not None:
            problems.append(("scripts", "give modes or scripts, not both"))
        if self.modes is None and self.scripts is None:
            problems.append((None, "missing modes (or scripts): which transactions to run"))
        if self.duration is not None and self.transactions is not None:
            problems.append(("transactions", "give duration or transactions, not both"))
        if self.duration is None and self.transactions is None:
            problems.append((None, "missing duration (or transactions): how long each run lasts"))
        rate_keys = [k for k in ("rate", "rates", "rate_fractions") if getattr(self, k)]
        if len(rate_keys) > 1:
            problems.append((rate_keys[1], f"give one of {', '.join(rate_keys)}, not several"))
        if len(problems) == 1:
            raise _conflict(*problems[0])
        if problems:  # a validator raises one error: name them all, at the step's header
            raise _conflict(None, "; ".join(message for _, message in problems))
        return self


class FioStep(_Step):
    """fio with named job profiles, on a file in the target's data directory."""

    workload: Literal["fio"]
    profiles: Annotated[list[ProfileName], Field(min_length=1)]
    size: Size = 64 * 1024**2
    runtime: Duration = 10.0

    @field_validator("profiles")
    @classmethod
    def _distinct(cls, values: list[str]) -> list[str]:
        return _no_duplicates(values)

    @field_validator("size")
    @classmethod
    def _whole_blocks(cls, size: int) -> int:
        # The fio profiles use PostgreSQL's 8 KiB block; a partial block cannot be tested.
        if size % 8192:
            raise ValueError(f"must be a multiple of 8KiB (8192 bytes), got {size} bytes")
        return size

    @field_validator("runtime")
    @classmethod
    def _runtime_in_seconds(cls, seconds: float) -> float:
        return _whole_seconds(seconds)


class PgTestFsyncStep(_Step):
    """pg_test_fsync: how fast each wal_sync_method makes a write durable."""

    workload: Literal["pg_test_fsync"]
    seconds: PositiveInt = 5


class SeqreadStep(_Step):
    """seqread: the time to read the largest pgbench table in full, from a cold cache."""

    workload: Literal["seqread"]
    cold: bool = True  # restart the server and drop the OS page cache first
    parallel: bool = False  # let PostgreSQL read with parallel workers


Step = Annotated[
    PgbenchInitStep | PgbenchStep | FioStep | PgTestFsyncStep | SeqreadStep,
    Field(discriminator="workload"),
]
STEP_MODELS: dict[str, type[_Step]] = {
    "pgbench-init": PgbenchInitStep,
    "pgbench": PgbenchStep,
    "fio": FioStep,
    "pg_test_fsync": PgTestFsyncStep,
    "seqread": SeqreadStep,
}


class Plan(BaseModel):
    """A plan file: settings for the clusters howfast creates, and the steps to run."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = ""  # defaults to the built-in's name or the file's stem
    description: str = ""
    repeat: PositiveInt = 1
    settings: Settings = {}
    steps: Annotated[list[Step], Field(min_length=1)]


# ---------------------------------------------------------------------------------------------
# Command-line overrides and the parsers the CLI uses to build them.


@dataclass(frozen=True)
class Overrides:
    """`howfast run` options that change a plan. None (or empty) leaves the plan's value.

    Checked on construction, so a bad value is a UsageError before anything runs.
    """

    scale: int | None = None
    clients: list[int] | None = None
    duration_s: float | None = None
    modes: list[str] | None = None
    repeat: int | None = None
    settings: dict[str, str] = field(default_factory=dict)
    rate: float | None = None  # --rate: one fixed offered rate for every pgbench step
    rates: list[float] | None = None  # --rates: these offered rates instead of the plan's
    slo: str | None = None  # --slo p99=10ms
    dataset: str | None = None  # --dataset: a regime or size for every pgbench-init step

    def __post_init__(self) -> None:
        if self.dataset is not None:
            if self.scale is not None:
                raise UsageError("give --scale or --dataset, not both")
            try:
                dataset_value(self.dataset)
            except ValueError as e:
                raise UsageError(f"--dataset {e}") from None
        if self.rate is not None and self.rates is not None:
            raise UsageError("give --rate or --rates, not both")
        for value in [self.rate] if self.rate is not None else self.rates or []:
            if value <= 0:
                raise UsageError(f"a rate must be above 0 transactions/s, got {value:g}")
        if self.slo is not None:
            from howfast.analysis.latency_curve import parse_slo

            object.__setattr__(self, "slo", parse_slo(self.slo).text)
        if self.scale is not None and self.scale < 1:
            raise UsageError(f"--scale must be 1 or more, got {self.scale}")
        if self.repeat is not None and self.repeat < 1:
            raise UsageError(f"--repeat must be 1 or more, got {self.repeat}")
        if self.clients is not None:
            _check_list("--clients", self.clients)
            if min(self.clients) < 1:
                raise UsageError(f"--clients must be 1 or more, got {min(self.clients)}")
        if self.modes is not None:
            _check_list("--modes", self.modes)
            for mode in self.modes:
                _check_mode(mode)
        if self.duration_s is not None:
            try:
                _whole_seconds(duration_seconds(self.duration_s))
            except ValueError as e:
                raise UsageError(f"--duration: {e}") from None
        try:
            settings = {setting_name(k): setting_value(v) for k, v in self.settings.items()}
        except ValueError as e:
            raise UsageError(f"--set: {e}") from None
        object.__setattr__(self, "settings", settings)  # frozen: normalise names once, here


def _check_list(option: str, values: list[Any]) -> None:
    if not values:
        raise UsageError(f"{option} needs at least one value")
    try:
        _no_duplicates(values)
    except ValueError as e:
        raise UsageError(f"{option}: {e}") from None


def _check_mode(mode: str) -> None:
    if mode not in PGBENCH_MODES:
        close = difflib.get_close_matches(mode, PGBENCH_MODES, n=1)
        hint = (
            f"did you mean {_q(close[0])}?" if close else f"choose from {', '.join(PGBENCH_MODES)}"
        )
        raise UsageError(f"unknown pgbench mode {_q(mode)}", hint=hint)


def parse_duration(text: str, option: str = "--duration") -> float:
    """Seconds in "500ms", "10s", "2m", "1h" or "30"; UsageError otherwise."""
    try:
        return duration_seconds(text)
    except ValueError as e:
        raise UsageError(f"{option}: {e}") from None


def parse_size(text: str, option: str = "--size") -> int:
    """Bytes in "64MiB", "1GiB", "512kB" or "4096"; UsageError otherwise."""
    try:
        return size_bytes(text)
    except ValueError as e:
        raise UsageError(f"{option}: {e}") from None


def parse_int_list(text: str, option: str = "--clients") -> list[int]:
    """Positive integers separated by commas: "1,2,4" -> [1, 2, 4]."""
    values = []
    for item in text.split(","):
        item = item.strip()
        if not (item.isascii() and item.isdigit()) or int(item) < 1:
            raise UsageError(
                f"{option}: {_q(item)} is not a whole number of 1 or more",
                hint="write numbers separated by commas, e.g. 1,2,4",
            )
        values.append(int(item))
    return values


def parse_modes(text: str, option: str = "--modes") -> list[str]:
    """pgbench modes separated by commas: "select-only,tpcb-like"."""
    modes = [item.strip() for item in text.split(",")]
    for mode in modes:
        _check_mode(mode)
    _check_list(option, modes)
    return modes


def parse_set_option(text: str) -> tuple[str, str]:
    """`--set name=value` -> (name, value). The value is kept as written (it may be empty)."""
    name, equals, value = text.partition("=")
    if not equals:
        raise UsageError(
            f"--set {_q(text)}: expected name=value", hint="e.g. --set shared_buffers=1GB"
        )
    try:
        return setting_name(name.strip()), setting_value(value)
    except ValueError as e:
        raise UsageError(f"--set {_q(text)}: {e}") from None
