"""The rule of every file howfast writes at a path the user gives (outfile.py), through the
real commands (`export json|csv|ndjson|prometheus -o`, `report -o`) run in-process, on real
special files made in a scratch directory: a FIFO, a unix socket bound here, a directory,
a device node (root only), symbolic links to each. Issue 35: `export -o /dev/full` as root
replaced the device with a regular file."""

from __future__ import annotations

import io
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from howfast.cli import main
from howfast.cli.context import CliEnv
from howfast.errors import UsageError
from howfast.outfile import output_file, write_file
from howfast.store import open_store
from tests.unit.stored_runs import init, pgbench, store_run

ROOT = os.geteuid() == 0
NOBODY = 65534

# Every command that writes a file, with what it needs besides -o; {ext} is a suffix it takes.
COMMANDS = {
    "export json": (["export", "json", "1"], ".json"),
    "export csv": (["export", "csv", "1"], ".csv"),
    "export ndjson": (["export", "ndjson", "1"], ".ndjson"),
    "export prometheus": (["export", "prometheus", "1"], ".prom"),
    "report": (["report", "1"], ".html"),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "results.db"
    with open_store(str(path)) as db:
        store_run(db, [init("/mnt/a", 10.0), pgbench("/mnt/a", 100.0)])
    return path


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A directory with a short path: a unix socket's name is at most 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="hf-out-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path)


def howfast(store: Path, *args: str) -> tuple[int, str, str]:
    env = CliEnv(
        stdout=io.StringIO(), stderr=io.StringIO(), environ={}, store_url=str(store),
        terminal=False,
    )  # fmt: skip
    status = main(list(args), env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return status, env.stdout.getvalue(), env.stderr.getvalue()


def fifo(path: Path) -> None:
    os.mkfifo(path)


def unix_socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))  # the file stays after close; the test's scratch removes it
    sock.close()


def device(path: Path) -> None:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is


def directory(path: Path) -> None:
    path.mkdir()


SPECIAL: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (fifo, "a FIFO"),
    "socket": (unix_socket, "a socket"),
    "directory": (directory, "a directory"),
    "device": (device, "a character device"),
}


def identity(path: Path) -> tuple[int, int, int, int]:
    found = os.lstat(path)
    return found.st_ino, found.st_dev, stat.S_IFMT(found.st_mode), found.st_rdev


def refused(status: int, out: str, err: str, *needles: str) -> None:
    assert status == 2, (status, err)
    assert "Traceback" not in err and err.count("howfast: error:") == 1, err
    assert out == ""
    for needle in needles:
        assert needle in err, (needle, err)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("linked", [False, True], ids=["itself", "through a link"])
def test_a_special_file_is_refused_and_left_as_it_was(
    store: Path, scratch: Path, command: str, kind: str, linked: bool
) -> None:
    if kind == "device" and not ROOT:
        pytest.skip("making a device node needs root")
    args, ext = COMMANDS[command]
    make, said = SPECIAL[kind]
    special = scratch / f"out{ext}"
    make(special)
    given = special
    if linked:
        given = scratch / f"link{ext}"
        given.symlink_to(special.name)
    before = {p.name: identity(p) for p in scratch.iterdir()}
    refused(*howfast(store, *args, "-o", str(given)), str(given), said, "regular file")
    assert {p.name: identity(p) for p in scratch.iterdir()} == before  # no temporary either


@pytest.mark.parametrize("command", COMMANDS)
def test_a_dangling_or_looping_link_is_refused(store: Path, scratch: Path, command: str) -> None:
    args, ext = COMMANDS[command]
    dangling = scratch / f"dangling{ext}"
    dangling.symlink_to("nowhere")
    loop = scratch / f"loop{ext}"
    loop.symlink_to(loop.name)
    refused(*howfast(store, *args, "-o", str(dangling)), "nowhere, which does not exist")
    refused(*howfast(store, *args, "-o", str(loop)), "loop")
    assert sorted(p.name for p in scratch.iterdir()) == sorted([dangling.name, loop.name])
    assert dangling.is_symlink() and loop.is_symlink()


@pytest.mark.parametrize("command", COMMANDS)
def test_an_existing_file_keeps_its_mode_and_owner(
    store: Path, scratch: Path, command: str
) -> None:
    args, ext = COMMANDS[command]
    path = scratch / f"out{ext}"
    path.write_text("earlier\n")
    path.chmod(0o600)
    if ROOT:  # only root can give a file to another user
        os.chown(path, NOBODY, NOBODY)
    status, _, err = howfast(store, *args, "-o", str(path))
    assert status == 0, err
    found = path.stat()
    assert path.read_text() != "earlier\n"
    assert stat.S_IMODE(found.st_mode) == 0o600
    if ROOT:
        assert (found.st_uid, found.st_gid) == (NOBODY, NOBODY)
    assert [p.name for p in scratch.iterdir()] == [path.name]


@pytest.mark.parametrize("command", COMMANDS)
def test_through_a_link_to_a_regular_file_its_target_is_replaced_and_said(
    store: Path, scratch: Path, command: str
) -> None:
    args, ext = COMMANDS[command]
    (scratch / "published").mkdir()
    real = scratch / "published" / f"out{ext}"
    real.write_text("earlier\n")
    real.chmod(0o640)
    link = scratch / f"link{ext}"
    link.symlink_to(real)
    status, _, err = howfast(store, *args, "-o", str(link))
    assert status == 0, err
    assert f"writing through the link {link} -> {real}" in " ".join(err.split())  # rich wraps
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() != "earlier\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert [p.name for p in real.parent.iterdir()] == [real.name]  # no temporary left


@pytest.mark.parametrize("command", COMMANDS)
def test_a_new_file_gets_the_umask_default(store: Path, scratch: Path, command: str) -> None:
    args, ext = COMMANDS[command]
    path = scratch / f"new{ext}"
    earlier = os.umask(0o027)
    try:
        status, _, err = howfast(store, *args, "-o", str(path))
    finally:
        os.umask(earlier)
    assert status == 0, err
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # 0666 less the umask's 027


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("char", ["\n", "\t", "\x1b", "\r", "\x85", "\x7f"])
def test_a_name_with_a_control_character_is_refused(
    store: Path, scratch: Path, command: str, char: str
) -> None:
    args, ext = COMMANDS[command]
    refused(*howfast(store, *args, "-o", str(scratch / f"a{char}b{ext}")), "control character")
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_directory_is_named(store: Path, scratch: Path, command: str) -> None:
    args, ext = COMMANDS[command]
    missing = scratch / "missing"
    refused(*howfast(store, *args, "-o", str(missing / f"out{ext}")), f"{missing} does not exist")
    (scratch / "file").write_text("")
    refused(*howfast(store, *args, "-o", str(scratch / "file" / f"out{ext}")), "not a directory")
    assert [p.name for p in scratch.iterdir()] == ["file"]


@pytest.mark.parametrize("command", COMMANDS)
def test_dash_writes_standard_output(store: Path, scratch: Path, command: str) -> None:
    args, _ = COMMANDS[command]
    extra = ["--format", "html"] if command == "report" else []
    status, out, err = howfast(store, *args, "-o", "-", *extra)
    assert status == 0, err
    assert out.startswith("<!doctype html>" if command == "report" else "") and len(out) > 100
    assert "wrote" not in err


def test_a_report_to_standard_output_needs_an_html_format(store: Path) -> None:
    refused(*howfast(store, "report", "1", "-o", "-"), "--format html")
    refused(*howfast(store, "report", "1", "-o", "-", "--format", "markdown"), "file name")
    refused(*howfast(store, "report", "1", "-o", "r.md", "--format", "html"), "--format says html")


def test_a_markdown_reports_charts_directory_follows_the_rule_too(
    store: Path, scratch: Path
) -> None:
    charts = scratch / "r-charts"
    os.mkfifo(charts)
    before = identity(charts)
    refused(*howfast(store, "report", "1", "-o", str(scratch / "r.md")), "a FIFO")
    assert identity(charts) == before
    assert [p.name for p in scratch.iterdir()] == ["r-charts"]


# -- the rule itself ----------------------------------------------------------------------------


def test_a_destination_swapped_for_a_fifo_while_writing_is_not_replaced(scratch: Path) -> None:
    path = scratch / "out.csv"
    checked = output_file(str(path))

    def chunks() -> Iterator[str]:
        yield "a\n"
        os.mkfifo(path)  # appears between the check and the rename
        yield "b\n"

    with pytest.raises(UsageError, match="became a FIFO"):
        write_file(checked, chunks())
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
    assert [p.name for p in scratch.iterdir()] == ["out.csv"]


def test_a_failed_write_leaves_the_earlier_file_and_no_temporary(scratch: Path) -> None:
    path = scratch / "out.csv"
    path.write_text("earlier\n")

    def chunks() -> Iterator[str]:
        yield "half"
        raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError):
        write_file(output_file(str(path)), chunks())
    assert path.read_text() == "earlier\n"
    assert [p.name for p in scratch.iterdir()] == ["out.csv"]


@pytest.mark.skipif(not ROOT, reason="needs root: a child becomes another user")
def test_a_file_that_cannot_keep_its_owner_is_refused_not_taken_over(scratch: Path) -> None:
    """A user who may replace a file in a shared directory, but not give the new one its
    owner, is refused: the file would silently become theirs. A forked child becomes user
    nobody (no interpreter to start: the one here may be under root's 0700 home)."""
    scratch.chmod(0o777)
    path = scratch / "out.csv"
    path.write_text("root's\n")
    pid = os.fork()
    if pid == 0:  # the child: exit 2 for the expected refusal, 3 for any other outcome
        code = 3
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            write_file(output_file(str(path)), ["x"])
        except UsageError as exc:
            code = 2 if "belongs to uid 0" in str(exc) else 3
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2
    assert path.read_text() == "root's\n" and path.stat().st_uid == 0
    assert [p.name for p in scratch.iterdir()] == ["out.csv"]


@pytest.mark.parametrize("special", ["fifo", "device"])
def test_a_store_that_is_not_a_regular_file_is_refused_and_left_alone(
    tmp_path: Path, special: str
) -> None:
    """`--store` is a file howfast writes too: a FIFO or a device is refused before SQLite
    opens it (it wrote into it and left a journal file beside it), and stays as it was."""
    from howfast.cli import main

    path = tmp_path / "store"
    if special == "fifo":
        os.mkfifo(path)
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    before = path.lstat()
    assert main(["results", "list", "--store", str(path)]) == 2
    after = path.lstat()
    assert (after.st_ino, after.st_mode, after.st_rdev) == (
        before.st_ino,
        before.st_mode,
        before.st_rdev,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
