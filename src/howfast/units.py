"""Durations and sizes as people write them: "500ms", "10s", "2m", "64MiB", "1GiB".

A leaf module: it imports nothing of howfast's but its errors and printable, so that plans,
sizing, the importer and the command line can all parse units without importing one another.

`duration_seconds` and `size_bytes` raise ValueError with a message written for the user (plan
files show it as the reason); `parse_duration` and `parse_size` turn it into a UsageError that
names the command-line option.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from fractions import Fraction

from howfast.errors import UsageError
from howfast.printable import printable

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


def quote(value: object) -> str:
    """A value quoted as TOML would write it, for messages: "10x", 5. Letters outside ASCII
    are shown as typed ("réstart"); characters a terminal would act on, escaped."""
    try:
        return printable(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return printable(str(value))


def duration_seconds(value: object) -> float:
    """Seconds in a positive duration: "500ms", "10s", "2m", "1h", or a number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a duration such as {_DURATION_EXAMPLES}")
    if isinstance(value, str):
        match = _NUMBER_UNIT.fullmatch(value.strip().lower())
        if match is None or match.group(2) not in _DURATION_UNITS:
            raise ValueError(f"{quote(value)} is not a duration; write {_DURATION_EXAMPLES}")
        seconds = float(Fraction(match.group(1)) * _DURATION_UNITS[match.group(2)])
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a duration must be more than zero, got {quote(value)}")
    return seconds


def size_bytes(value: object) -> int:
    """Bytes in a positive size: "64MiB", "1GiB", "512kB" (all binary multiples), or bytes."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected a size such as {_SIZE_EXAMPLES}")
    if isinstance(value, str):
        match = _NUMBER_UNIT.fullmatch(value.strip().lower())
        if match is None or match.group(2) not in _SIZE_UNITS:
            raise ValueError(f"{quote(value)} is not a size; write {_SIZE_EXAMPLES}")
        exact = Fraction(match.group(1)) * _SIZE_UNITS[match.group(2)]
        if exact.denominator != 1:
            raise ValueError(f"{quote(value)} is not a whole number of bytes")
        size = int(exact)
    else:
        size = value
    if size <= 0:
        raise ValueError(f"a size must be more than zero, got {quote(value)}")
    return size


def plain_number(value: float) -> str:
    """The shortest decimal that reads back as exactly `value`, never in exponent form (which
    the duration grammar does not read): 20.0 -> '20', 0.5 -> '0.5', 1234567.0 -> '1234567',
    1e-06 -> '0.000001'. ValueError for NaN and infinities."""
    if not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    text = format(Decimal(repr(float(value))), "f")  # repr: the shortest that round-trips
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def whole_seconds(seconds: float) -> float:
    """`seconds` unchanged when it is a whole number; ValueError otherwise (pgbench -T, fio)."""
    if seconds != int(seconds):
        raise ValueError(f"must be whole seconds, got {seconds:g}s")
    return seconds


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


def format_bytes(n: int | float) -> str:
    """1073741824 -> '1.0 GiB', 16777216 -> '16 MiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(n)} bytes"


def human_bytes(n: float) -> str:
    """'1.50 GiB', '224 MiB'; below a MiB in KiB or bytes, never '0 MiB'."""
    if n >= 1024**3:
        return f"{n / 1024**3:.2f} GiB"
    if n >= 1024**2:
        return f"{n / 1024**2:.0f} MiB"
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n:.0f} bytes"
