"""A target's design: how many standbys it gets, which synchronous-commit level, where they
live, where the client runs (issue 28). Pure words shared by the CLI, plans, target kinds and
the targets: what was asked, before any kind decides what it can do with it.

The same keys come from run options (`--replicas 1 --sync on`), a plan's `[design]` and a
target string's query (`/data/a?replicas=1&sync=remote_write`, `k8s://CLASS?replicas=1`);
`merge_design` layers them: the first that says a key wins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Literal, cast, get_args

from howfast.errors import UsageError
from howfast.units import parse_duration

SyncLevel = Literal["off", "local", "remote_write", "on", "remote_apply"]
ClientMode = Literal["socket", "tcp", "pod", "same-pod"]
SYNC_LEVELS: tuple[str, ...] = get_args(SyncLevel)
CLIENT_MODES: tuple[str, ...] = get_args(ClientMode)
MAX_REPLICAS = 8

# Every key a query may hold; each kind allows its own subset.
DESIGN_KEYS = (
    "replicas",
    "sync",
    "standby_dir",
    "standby_latency",
    "standby_class",
    "client",
    "client_node",
)
# `key=value&key=value` after the text's last "?". Keys in any case are read as a query, so
# that `?REPLICAS=1` is refused by name (keys are lower-case) instead of being taken for part
# of a directory's name ("directory .../a?REPLICAS=1 does not exist").
_QUERY = re.compile(r"[A-Za-z_]+=[^&]*(?:&[A-Za-z_]+=[^&]*)*")


@dataclass(frozen=True)
class DesignOptions:
    """What a run option, a plan section or a target string asked; None: not said."""

    replicas: int | None = None
    sync: SyncLevel | None = None
    standby_dirs: tuple[Path, ...] = ()
    standby_latency_ms: float | None = None
    standby_class: str | None = None
    client: ClientMode | None = None
    client_node: str | None = None

    def given(self) -> list[str]:
        """The keys that say something, as a query spells them."""
        names = {"standby_dirs": "standby_dir", "standby_latency_ms": "standby_latency"}
        return [
            names.get(f.name, f.name)
            for f in fields(self)
            if getattr(self, f.name) not in (None, ())
        ]


def parse_replicas(text: str, where: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a number of standbys") from None
    if not 0 <= count <= MAX_REPLICAS:
        raise UsageError(f"{where}: {count} is not in the range 0<=x<={MAX_REPLICAS}")
    return count


def parse_sync(text: str, where: str) -> SyncLevel:
    if text not in SYNC_LEVELS:
        raise UsageError(f"{where}: {text!r} is not one of {', '.join(SYNC_LEVELS)}")
    return cast(SyncLevel, text)


def parse_client(text: str, where: str) -> ClientMode:
    if text not in CLIENT_MODES:
        raise UsageError(f"{where}: {text!r} is not one of {', '.join(CLIENT_MODES)}")
    return cast(ClientMode, text)


def parse_latency_ms(text: str, where: str) -> float:
    """'2ms', '0.5ms', '0' -> milliseconds."""
    if text.strip() in ("0", "0ms"):
        return 0.0
    return parse_duration(text, where) * 1000


def split_design_query(text: str, allowed: frozenset[str]) -> tuple[str, DesignOptions]:
    """`'/data/a?replicas=1&sync=on'` -> (`'/data/a'`, DesignOptions(replicas=1, sync='on')).
    A text whose last `?` is not followed by `key=value` pairs has no query (a directory may
    hold a `?`). UsageError for a key not in `allowed`, or a bad value."""
    head, mark, query = text.rpartition("?")
    if not mark or not _QUERY.fullmatch(query):
        return text, DesignOptions()
    values: dict[str, object] = {}
    dirs: list[Path] = []
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key not in allowed:
            known = [k for k in DESIGN_KEYS if k in allowed]
            raise UsageError(f"{text}: {unknown_key(key, known)}")
        where = f"{head}?{key}="
        if key == "standby_dir":
            dirs.append(Path(value).expanduser())
            continue
        if key in values:
            raise UsageError(f"{text}: {key} is given twice")
        if key == "replicas":
            values["replicas"] = parse_replicas(value, where)
        elif key == "sync":
            values["sync"] = parse_sync(value, where)
        elif key == "standby_latency":
            values["standby_latency_ms"] = parse_latency_ms(value, where)
        elif key == "client":
            values["client"] = parse_client(value, where)
        elif not value:
            raise UsageError(f"{where}: an empty value")
        else:
            values[key] = value
    return head, replace(DesignOptions(standby_dirs=tuple(dirs)), **values)  # type: ignore[arg-type]


def unknown_key(key: str, known: Sequence[str]) -> str:
    """'unknown option REPLICAS (keys are lower-case: did you mean replicas?); the options:
    ...' for a target query's key. Keys are matched exactly, as every other option is."""
    import difflib  # only for a typo's suggestion

    close = difflib.get_close_matches(key.lower(), known, n=1, cutoff=0.6)
    if key.lower() in known:
        hint = f" (keys are lower-case: did you mean {close[0]}?)"
    else:
        hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown option {key}{hint}; the options: {', '.join(known)}"


def merge_design(*layers: DesignOptions) -> DesignOptions:
    """The first layer that says a key wins (target string, then CLI, then plan)."""
    merged: dict[str, object] = {}
    for f in fields(DesignOptions):
        for layer in layers:
            value = getattr(layer, f.name)
            if value not in (None, ()):
                merged[f.name] = value
                break
    return DesignOptions(**merged)  # type: ignore[arg-type]
