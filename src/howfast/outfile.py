"""The one rule for a file written at a path the user gives (`export ... -o`, `report -o`).

- `-` is standard output (the caller writes there; `output_file` is not asked).
- The path must be a regular file or a new name in an existing directory. A character or block
  device, a FIFO, a socket or a directory is refused: a rename over it would replace the
  device node or pipe with a regular file (`/dev/full` run as root), and writing into it
  would block or be lost.
- A symbolic link is followed when it leads to an existing regular file; that file is
  replaced and the link stays (`OutputFile.note` says so). A link that leads anywhere else,
  nowhere (dangling) or round in a loop is refused: writing through a dangling link would
  create a file at a place the command line never named.
- A name holding a control character (newline, tab, ESC, C1, bidirectional overrides) is
  refused: nobody could read it back in a listing.
- The file is written under a temporary name in the destination's own directory, flushed to
  the disk, given the replaced file's mode and owner (a new file gets the default of the
  process's umask), checked again and renamed over the destination, so that a reader never
  sees half a file, and an error or Ctrl-C leaves the earlier file as it was and no
  temporary file behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from howfast.errors import UsageError
from howfast.printable import first_unsafe

STDOUT = "-"
WHAT_IS_WRITTEN = "howfast writes only a regular file or a new name (or - for standard output)"
# A temporary name is the destination's, shortened to stay within NAME_MAX (255 bytes).
_TEMP_NAME_CHARS = 150


def _token() -> str:
    """A temporary file's random part (secrets imported here: every command imports this
    module, few write a file)."""
    import secrets

    return secrets.token_hex(4)


@dataclass(frozen=True)
class OutputFile:
    """A checked destination. `path` is the name the rename replaces: `given` itself, or the
    regular file its symbolic link leads to. `existing` is that file's status (its mode,
    owner and identity are kept), None for a new name."""

    option: str
    given: Path
    path: Path
    existing: os.stat_result | None

    @property
    def through_link(self) -> bool:
        return self.path != self.given

    def note(self) -> str | None:
        """What to say on stderr before writing, when the link's file is written."""
        if not self.through_link:
            return None
        return f"writing through the link {self.given} -> {self.path}"


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def name_problem(text: str) -> str | None:
    """Why `text` cannot name a file howfast writes, or None."""
    if not text.strip():
        return "the value is empty or only blanks (an unset shell variable?): give a file name"
    found = first_unsafe(text)
    if found is not None:
        index, shown = found
        return (
            f"the name contains a control character ({shown} at character {index + 1}): "
            "give a name without it"
        )
    return None


def output_file(text: str, option: str = "-o") -> OutputFile:
    """The destination `text` names, checked by the rule above; UsageError naming the option,
    the path and what is wrong otherwise. Not for '-' (standard output)."""
    problem = name_problem(text)
    if problem:
        raise UsageError(f"{option} {text!r}: {problem}")
    if text.endswith("/"):
        raise UsageError(f"{option} {text}: names a directory; give a file name")
    given = Path(text)
    try:
        found = os.lstat(given)
    except FileNotFoundError:
        _check_directory(option, given, given.parent)
        return OutputFile(option, given, given, None)
    except OSError as exc:  # a component that is a file, a loop, no permission
        raise UsageError(f"{option} {given}: {_reason(exc)}") from None
    if stat.S_ISLNK(found.st_mode):
        return _through_link(option, given)
    if not stat.S_ISREG(found.st_mode):
        raise UsageError(f"{option} {given}: is {kind_of(found.st_mode)}; {WHAT_IS_WRITTEN}")
    _check_directory(option, given, given.parent)
    return OutputFile(option, given, given, found)


def _through_link(option: str, given: Path) -> OutputFile:
    target = Path(os.path.realpath(given))
    where = f"{option} {given}: a symbolic link to {os.readlink(given)}"
    try:
        found = os.stat(given)
    except FileNotFoundError:
        raise UsageError(
            f"{where}, which does not exist",
            hint="howfast writes through a link only to an existing regular file; "
            "give the file's own name to create it",
        ) from None
    except OSError as exc:
        raise UsageError(f"{where}: {_reason(exc)}") from None
    if not stat.S_ISREG(found.st_mode):
        raise UsageError(f"{where}, which is {kind_of(found.st_mode)}; {WHAT_IS_WRITTEN}")
    _check_directory(option, given, target.parent)
    return OutputFile(option, given, target, found)


def _check_directory(option: str, given: Path, directory: Path) -> None:
    """The directory the temporary file and the rename go in exists and can be written."""
    shown = directory if str(directory) else Path(".")
    try:
        found = os.stat(shown)
    except FileNotFoundError:
        raise UsageError(f"{option} {given}: the directory {shown} does not exist") from None
    except OSError as exc:
        raise UsageError(f"{option} {given}: the directory {shown}: {_reason(exc)}") from None
    if not stat.S_ISDIR(found.st_mode):
        raise UsageError(f"{option} {given}: {shown} is {kind_of(found.st_mode)}, not a directory")
    if not os.access(shown, os.W_OK | os.X_OK):
        reason = "it is on a read-only file system" if _read_only(shown) else "permission denied"
        raise UsageError(f"{option} {given}: cannot write in {shown}: {reason}")


def _read_only(directory: Path) -> bool:
    return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link that leads round in a loop"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is not a directory"
    return exc.strerror or str(exc)


class Replacement:
    """A temporary file beside `out.path`, already with the mode and owner the result must
    have; `commit` renames it over the destination, `discard` removes it."""

    def __init__(self, out: OutputFile) -> None:
        self.out = out
        self.directory = out.path.parent if str(out.path.parent) else Path(".")
        fd, self.temp = _create_temp(self.directory, out.path.name, new=out.existing is None)
        try:
            if out.existing is not None:
                _take_over(fd, out)
            self.file: TextIO = os.fdopen(fd, "w", encoding="utf-8")
        except BaseException:
            os.close(fd)
            self.temp.unlink(missing_ok=True)
            raise
        self._done = False

    def commit(self) -> None:
        """Flush to the disk, check the destination, rename."""
        self.finish()
        self.put_in_place()

    def finish(self) -> None:
        """The content on the disk (what can fail for want of room fails here), and the
        destination still what was checked."""
        if not self.file.closed:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
        _still_writable(self.out)

    def put_in_place(self) -> None:
        """The rename (after `finish`), and the rename on the disk."""
        _still_writable(self.out)
        os.replace(self.temp, self.out.path)
        self._done = True
        _sync_directory(self.directory)

    def discard(self) -> None:
        if not self._done:
            # A close flushes what is buffered, and fails again where the flush failed
            # (ENOSPC): the temporary file goes all the same.
            with contextlib.suppress(OSError):
                self.file.close()
            self.temp.unlink(missing_ok=True)
            self._done = True


@contextlib.contextmanager
def replacing(out: OutputFile) -> Iterator[TextIO]:
    """A text file to write; in place of `out` when the block ends, removed whatever
    stops it. OSError as a UsageError naming the path."""
    try:
        replacement = Replacement(out)
    except OSError as exc:
        raise UsageError(f"{out.option} {out.given}: cannot write: {_reason(exc)}") from None
    try:
        yield replacement.file
        replacement.commit()
    except OSError as exc:
        raise UsageError(
            f"{out.option} {out.given}: cannot write: {_reason(exc)}",
            hint=_unchanged(out),
        ) from None
    finally:
        replacement.discard()


def _unchanged(out: OutputFile) -> str:
    return (
        "nothing was written: the earlier file is unchanged"
        if out.existing
        else ("nothing was written")
    )


def write_file(out: OutputFile, chunks: Iterable[str]) -> None:
    """Write the chunks to `out`, whole or not at all."""
    with replacing(out) as handle:
        for chunk in chunks:
            handle.write(chunk)


def _create_temp(directory: Path, name: str, new: bool) -> tuple[int, Path]:
    """A new file `.NAME.XXXXXXXX.tmp` in `directory`, open for writing. Created with mode
    0666 for a new destination, so that the kernel applies the umask (and a default ACL) as
    to any file a program creates; 0600 when an existing file's mode is copied onto it."""
    mode = 0o666 if new else 0o600
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        temp = directory / f".{name[:_TEMP_NAME_CHARS]}.{_token()}.tmp"
        try:
            return os.open(temp, flags, mode), temp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(directory))


def create_temp_dir(directory: Path, name: str) -> Path:
    """A new directory `.NAME.XXXXXXXX.tmp` in `directory`, with the umask's default mode."""
    for _ in range(100):
        temp = directory / f".{name[:_TEMP_NAME_CHARS]}.{_token()}.tmp"
        try:
            os.mkdir(temp, 0o777)
            return temp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(directory))


def _take_over(fd: int, out: OutputFile) -> None:
    """The replaced file's owner and permission bits on the temporary file (owner first: a
    change of owner may reset the mode). Not its set-user/group-ID bits: what howfast
    writes is never a program to run as its owner."""
    existing = out.existing
    assert existing is not None
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) != (existing.st_uid, existing.st_gid):
        try:
            os.fchown(fd, existing.st_uid, existing.st_gid)
        except PermissionError:
            raise UsageError(
                f"{out.option} {out.given}: belongs to uid {existing.st_uid} gid "
                f"{existing.st_gid}, and a file written by this user cannot keep that owner",
                hint="write it as its owner or as root, or remove it first",
            ) from None
    os.fchmod(fd, stat.S_IMODE(existing.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))


def _still_writable(out: OutputFile) -> None:
    """Just before the rename: what is at the destination now is still a regular file (or
    nothing), in case it was swapped while the file was written."""
    try:
        now = os.lstat(out.path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(now.st_mode):
        raise UsageError(
            f"{out.option} {out.given}: became {kind_of(now.st_mode)} while howfast wrote it; "
            "nothing was written"
        )


def _sync_directory(directory: Path) -> None:
    """The rename itself on the disk; a file system that cannot sync a directory is left be."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
