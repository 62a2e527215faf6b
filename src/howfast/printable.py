"""Text from users and tools made safe to print on a terminal (pure).

A label, a target name or an imported run's fields may hold control characters: an escape
sequence would clear or recolour the terminal, a carriage return hide what came before it,
a bidirectional override reorder what is read. They are shown as Python-style escapes
instead (`\\x1b`, `\\r`, `\\u202e`); everything else is kept as it is.
"""

from __future__ import annotations

import unicodedata

# Bidirectional embeddings, overrides and isolates, and the invisible direction marks.
_BIDI = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def unsafe(char: str) -> bool:
    """Whether `char` changes how a terminal shows text instead of being shown."""
    return unicodedata.category(char) in ("Cc", "Zl", "Zp") or char in _BIDI


def escape_char(char: str) -> str:
    """`\\x1b`, `\\n`, `\\u202e`: how an unsafe character is shown."""
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep: str = "") -> str:
    """`text` with every unsafe character but those in `keep` (e.g. "\\n" for a message of
    several lines) written as an escape."""
    if text.isprintable() or not any(unsafe(c) and c not in keep for c in text):
        return text
    return "".join(escape_char(c) if unsafe(c) and c not in keep else c for c in text)


def first_unsafe(text: str) -> tuple[int, str] | None:
    """The position and escape of the first unsafe character, if any."""
    for index, char in enumerate(text):
        if unsafe(char):
            return index, escape_char(char)
    return None
