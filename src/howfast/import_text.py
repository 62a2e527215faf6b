"""An imported file's or standard input's text, read in chunks and never held whole (a long
run's output can be tens of megabytes), or a UsageError that says what the input really is:
empty, a directory, in an encoding that is not text howfast reads."""

from __future__ import annotations

import codecs
import io
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Protocol

from howfast.errors import UsageError

CHUNK_BYTES = 1 << 20
# Standard input is copied to a temporary file to be read more than once; this much of it
# stays in memory.
STDIN_IN_MEMORY_BYTES = 8 << 20
# Byte order marks, longest first (UTF-32-LE's starts with UTF-16-LE's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
)
_CONVERT_HINT = "convert it to UTF-8 first: iconv -f ENCODING -t UTF-8 FILE > FILE.utf8"
# what str.splitlines ends a line at
_LINE_ENDS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


class Stream(Protocol):
    """What TextSource reads its input through: a binary file, opened at its start."""

    def read(self, size: int, /) -> bytes: ...

    def __enter__(self) -> Stream: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None: ...


class TextSource:
    """The text of an input, read from its start at each call of `chunks`, `lines` or
    `text`. Made by `open_source`, which has read it once already: it decodes, it is text and
    not empty."""

    def __init__(self, name: str, open_bytes: Callable[[], Stream]) -> None:
        self.name = name
        self._open = open_bytes
        with open_bytes() as stream:
            head = stream.read(CHUNK_BYTES)
        self._codec, self._label, self._skip = _encoding(head)
        text_seen = False
        for chunk in self.chunks():  # every byte read once: what cannot be read is said now
            text_seen = text_seen or not chunk.isspace()
        if not text_seen:
            raise UsageError(f"{name}: empty input (no text at all)")

    @classmethod
    def of_bytes(cls, data: bytes, name: str) -> TextSource:
        """An input already in memory."""
        return cls(name, lambda: io.BytesIO(data))

    def chunks(self) -> Iterator[str]:
        """The decoded text in pieces of about CHUNK_BYTES. Raises UsageError for bytes that do
        not decode, with their offset, and for NUL characters (binary data)."""
        decoder = codecs.getincrementaldecoder(self._codec)()
        given = self._skip  # bytes read before the chunk being decoded
        with self._open() as stream:
            stream.read(self._skip)  # the byte order mark
            while True:
                data = stream.read(CHUNK_BYTES)
                try:
                    text = decoder.decode(data, final=not data)
                except UnicodeDecodeError as exc:
                    held = len(exc.object) - len(data)  # bytes kept from the previous chunk
                    self._undecodable(exc, given - held + exc.start)
                if "\x00" in text:
                    raise UsageError(
                        f"{self.name}: binary data (NUL characters in {self._label} text), "
                        "not tool output"
                    )
                if text:
                    yield text
                if not data:
                    return
                given += len(data)

    def lines(self) -> Iterator[str]:
        """The lines, without their ends, as str.splitlines cuts them."""
        pending = ""
        after_cr = False
        for chunk in self.chunks():
            if after_cr and chunk.startswith("\n"):  # a "\r\n" cut between two chunks
                chunk = chunk[1:]
            buffer = pending + chunk
            if not buffer:
                continue
            lines = buffer.splitlines()
            pending = "" if buffer[-1] in _LINE_ENDS else lines.pop()
            after_cr = buffer[-1] == "\r"
            yield from lines
        if pending:
            yield pending

    def text(self) -> str:
        """The whole text, for formats read whole (fio's JSON)."""
        return "".join(self.chunks())

    def _undecodable(self, exc: UnicodeDecodeError, offset: int) -> None:
        bad = exc.object[exc.start : exc.start + 4].hex(" ")
        raise UsageError(
            f"{self.name}: not readable as {self._label} text: bytes {bad} at offset {offset}",
            _CONVERT_HINT if self._label == "UTF-8" else "the file may be cut or damaged",
        ) from None


def open_source(source: str, stdin: IO[bytes] | None) -> TextSource:
    """The text of a file path, or of '-' (standard input, given as `stdin`, copied to a
    temporary file as it is read)."""
    if source == "-":
        spool = tempfile.SpooledTemporaryFile(max_size=STDIN_IN_MEMORY_BYTES)  # noqa: SIM115
        if stdin is not None:
            shutil.copyfileobj(stdin, spool, CHUNK_BYTES)
        return TextSource("stdin", lambda: _Rewound(spool))
    path = Path(source)
    if path.is_dir():
        raise UsageError(f"{source}: is a directory, not a file of tool output")
    if not path.exists():
        raise UsageError(f"{source}: no such file")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise UsageError(f"{source}: cannot read: {exc.strerror}") from None
    return TextSource(path.name, lambda: path.open("rb"))


def _encoding(head: bytes) -> tuple[str, str, int]:
    """(codec, name to show, bytes of byte order mark) of a text that starts with `head`:
    UTF-8, UTF-16/32 with a byte order mark (what PowerShell's `>` writes), or UTF-16 without
    one (NUL bytes every other byte)."""
    for bom, codec, label in _BOMS:
        if head.startswith(bom):
            return codec, label, len(bom)
    nul_even, nul_odd = head[0::2].count(0), head[1::2].count(0)
    if nul_odd > len(head) // 4 and nul_even == 0:
        return "utf-16-le", "UTF-16 (little-endian, no byte order mark)", 0
    if nul_even > len(head) // 4 and nul_odd == 0:
        return "utf-16-be", "UTF-16 (big-endian, no byte order mark)", 0
    return "utf-8", "UTF-8", 0


class _Rewound:
    """A spooled copy of standard input, read from its start, left open when a read is done."""

    def __init__(self, spool: IO[bytes]) -> None:
        self._spool = spool
        spool.seek(0)

    def read(self, size: int, /) -> bytes:
        return self._spool.read(size)

    def __enter__(self) -> _Rewound:
        return self

    def __exit__(self, *_: object) -> None:
        return None
