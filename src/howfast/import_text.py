"""Bytes of an imported file or of standard input turned into text, or a UsageError that says
what the input really is: empty, a directory, in an encoding that is not text howfast reads."""

from __future__ import annotations

import codecs
from pathlib import Path

from howfast.errors import UsageError

# Byte order marks, longest first (UTF-32-LE's starts with UTF-16-LE's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
)
_CONVERT_HINT = "convert it to UTF-8 first: iconv -f ENCODING -t UTF-8 FILE > FILE.utf8"


def read_source(source: str, stdin_bytes: bytes | None) -> tuple[bytes, str]:
    """(bytes, name) of a file path, or of '-' (standard input, given as stdin_bytes)."""
    if source == "-":
        return stdin_bytes or b"", "stdin"
    path = Path(source)
    if path.is_dir():
        raise UsageError(f"{source}: is a directory, not a file of tool output")
    if not path.exists():
        raise UsageError(f"{source}: no such file")
    try:
        return path.read_bytes(), path.name
    except OSError as exc:
        raise UsageError(f"{source}: cannot read: {exc.strerror}") from None


def decode(data: bytes, name: str) -> str:
    """The text of an input: UTF-8, or UTF-16/32 with a byte order mark (what PowerShell's `>`
    writes), or UTF-16 without one (NUL bytes every other byte). Raises UsageError for empty
    input and for bytes that are none of these, saying so."""
    text = _text(data, name)
    if not text.strip():
        raise UsageError(f"{name}: empty input (no text at all)")
    return text


def _text(data: bytes, name: str) -> str:
    for bom, codec, label in _BOMS:
        if data.startswith(bom):
            return _decode(data[len(bom) :], codec, name, label)
    nul_even, nul_odd = data[0::2].count(0), data[1::2].count(0)
    if nul_odd > len(data) // 4 and nul_even == 0:
        return _decode(data, "utf-16-le", name, "UTF-16 (little-endian, no byte order mark)")
    if nul_even > len(data) // 4 and nul_odd == 0:
        return _decode(data, "utf-16-be", name, "UTF-16 (big-endian, no byte order mark)")
    return _decode(data, "utf-8", name, "UTF-8")


def _decode(data: bytes, codec: str, name: str, label: str) -> str:
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 4].hex(" ")
        raise UsageError(
            f"{name}: not readable as {label} text: bytes {bad} at offset {exc.start}",
            _CONVERT_HINT if label == "UTF-8" else "the file may be cut or damaged",
        ) from None
    if "\x00" in text:
        raise UsageError(f"{name}: binary data (NUL characters in {label} text), not tool output")
    return text
