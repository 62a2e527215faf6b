"""An imported input read in chunks (import_text.TextSource): lines cut as str.splitlines
cuts them whatever the chunks, and what cannot be read said with its offset, before anything
is parsed or stored."""

from __future__ import annotations

import pytest

from howfast import import_text
from howfast.errors import UsageError
from howfast.import_text import TextSource


def test_a_text_source_cuts_lines_across_its_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_text, "CHUNK_BYTES", 7)
    text = "first line\r\nsecond\rthird\n\nfourth é line\r\n"
    source = TextSource.of_bytes(text.encode(), "x")
    assert list(source.lines()) == text.splitlines()
    assert source.text() == text
    utf16 = TextSource.of_bytes(b"\xff\xfe" + text.encode("utf-16-le"), "y")
    assert list(utf16.lines()) == text.splitlines()


def test_a_text_source_says_where_bytes_do_not_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(import_text, "CHUNK_BYTES", 4)
    with pytest.raises(UsageError, match=r"bytes e9 0a at offset 12"):
        TextSource.of_bytes(b"tps = 1\nabcd\xe9\n", "x")
    with pytest.raises(UsageError, match="binary data"):
        TextSource.of_bytes(b"tps = 1\nabcdef\x00\n", "x")
    with pytest.raises(UsageError, match="empty input"):
        TextSource.of_bytes(b" \n\t\r\n", "x")
