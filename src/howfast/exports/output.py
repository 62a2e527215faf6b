"""Where an export goes: standard output (`-o -` or no `-o`), or a file written under a
temporary name beside it and renamed, so that no reader ever sees half a file and a failed
export leaves the previous file as it was."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from howfast.errors import UsageError


def write_chunks(path: Path, chunks: Iterable[str]) -> None:
    """Write the chunks to a temporary file in `path`'s directory, then rename it to `path`;
    UsageError (nothing left behind) when the directory cannot be written."""
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"-o {path}: is a directory; give a file name")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UsageError(f"-o {path}: cannot write in {directory}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for chunk in chunks:
                handle.write(chunk)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"-o {path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_output(output: str | None, chunks: Iterable[str], stdout: TextIO) -> Path | None:
    """To stdout when `output` is None or '-', else atomically to that file (returned)."""
    if output is None or output == "-":
        try:
            for chunk in chunks:
                stdout.write(chunk)
            stdout.flush()
        except BrokenPipeError:  # the reader had what it wanted (`| head`): stop quietly
            _silence(stdout)
        return None
    path = Path(output)
    write_chunks(path, chunks)
    return path


def _silence(stdout: TextIO) -> None:
    """Point the closed pipe's descriptor at /dev/null, so that Python's last flush at exit
    does not fail again on it."""
    try:
        fd = stdout.fileno()
    except (OSError, ValueError):  # not a file (a test's StringIO)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
