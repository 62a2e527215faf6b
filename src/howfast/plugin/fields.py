"""The value types a plan file's steps are written in, shared by every workload's step model
and by the plan itself (its `[settings]`).

Each validator raises ValueError with a message written for the user; the plan loader shows it
as the reason, at the line of the key. Cross-field checks raise `conflict(...)` errors whose
context names the key to point at.

Imports nothing of howfast's plans package, so that a workload's plan module can be imported
on its own (the plan model itself is built from the workload registry).
"""

from __future__ import annotations

import re
from typing import Annotated, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from howfast.units import duration_seconds, quote, size_bytes

_T = TypeVar("_T")

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
            f"{quote(name)} is not a PostgreSQL setting name "
            "(letters, digits and underscores, with dots for extension settings)"
        )
    reason = RESERVED_SETTINGS.get(name.lower())
    if reason:
        raise ValueError(f"{quote(name)} cannot be set: {reason}")
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
                raise ValueError(
                    f"{quote(seen[name.lower()])} and {quote(name)} are the same setting"
                )
            seen[name.lower()] = name
            flat[name] = value

    walk("", raw)
    return flat


def conflict(key: str | None, message: str) -> PydanticCustomError:
    """A cross-field error; `key` is the key the loader points at (None: the step itself)."""
    return PydanticCustomError("plan_conflict", message, {"key": key})


def no_duplicates(values: list[_T]) -> list[_T]:
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        raise ValueError(f"listed more than once: {', '.join(repeated)}")
    return values


def one_or_list(value: object) -> object:
    """`clients = 4` is read as `clients = [4]`."""
    return [value] if isinstance(value, int) and not isinstance(value, bool) else value


# Where to connect is the target's business, for every workload.
CONNECTION_OPTIONS = ("-h", "--host", "-p", "--port", "-U", "--username")


def _sets_option(arg: str, option: str) -> bool:
    """Whether `arg` is `option`, with its value attached or not (`-c8`, `--client=8`)."""
    if option.startswith("--"):
        return arg == option or arg.startswith(option + "=")
    return arg.startswith(option) and not arg.startswith("--")


def check_extra_arg(arg: str, owned: dict[str, str]) -> str:
    """One item of `extra_args`: refused when a plan key (`owned`: option -> key) or the
    target (connection options) decides it, so that the recorded params describe what ran."""
    if not arg:
        raise ValueError("an empty argument")
    for option, key in owned.items():
        if _sets_option(arg, option):
            raise ValueError(f"{quote(arg)} is set by the plan key {key}; use that instead")
    if any(_sets_option(arg, option) for option in CONNECTION_OPTIONS):
        raise ValueError(f"{quote(arg)}: where to connect is set by the target (--target)")
    return arg


PositiveInt = Annotated[int, Field(ge=1)]
Duration = Annotated[float, BeforeValidator(duration_seconds)]
Size = Annotated[int, BeforeValidator(size_bytes)]
SettingName = Annotated[str, AfterValidator(setting_name)]
SettingValue = Annotated[str, BeforeValidator(setting_value)]
Settings = Annotated[dict[SettingName, SettingValue], BeforeValidator(_flatten_settings)]
