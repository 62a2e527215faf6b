"""Where an export goes: standard output (`-o -` or no `-o`), or a file written by the rule
of every file howfast writes (outfile.py): a regular file or a new name, under a temporary
name beside it and renamed, so that no reader ever sees half a file and a failed export
leaves the previous file as it was."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from howfast.outfile import OutputFile, write_file


def write_output(output: OutputFile | None, chunks: Iterable[str], stdout: TextIO) -> Path | None:
    """To stdout when `output` is None ('-' or no -o), else atomically to that file (whose
    name as given is returned)."""
    if output is None:
        try:
            for chunk in chunks:
                stdout.write(chunk)
            stdout.flush()
        except BrokenPipeError:  # the reader had what it wanted (`| head`): stop quietly
            _silence(stdout)
        return None
    write_file(output, chunks)
    return output.given


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
