"""The shared memory of a server a failover killed is freed even when the server had got a
System V key other than its data directory's inode number (issue 38's failover trials).

PostgreSQL gives a server's segment the first free key from the data directory's inode
number up; a postmaster started on that directory later (failover.tidy_killed) removes the
killed server's segment only if it meets it on that same walk. Here the server starts while
two segments of someone else's (decoys this test makes, as root: PostgreSQL, another user,
takes them for foreign) hold the inode key and the next, so it takes a key further up; the
second decoy then goes (as another server would have shut down), so the tidying postmaster
takes that key and never visits the killed server's. A real PostgreSQL as the postgres OS
user (tests/pgprocess.py), killed with the product's failover.kill_all.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import signal
from pathlib import Path

import pytest

from howfast.machine.pgbin import PgInstall, choose_install, program_version
from howfast.targets.leftovers import registry
from howfast.targets.leftovers.machine import read_sysv
from howfast.targets.local import LocalTarget
from howfast.targets.local_server import free_port
from howfast.targets.osuser import OsUser
from howfast.targets.replicas import failover
from tests.integration.conftest import postgres_pids_under, shared_memory_of
from tests.pgprocess import Postmaster, bindir

pytestmark = pytest.mark.integration

IPC_CREAT, IPC_EXCL, IPC_RMID = 0o1000, 0o2000, 0
_libc = ctypes.CDLL(None, use_errno=True)


def _key(number: int) -> int:
    """A key as PostgreSQL takes it from st_ino: a C int (key_t)."""
    return ctypes.c_int(number & 0xFFFFFFFF).value


def make_decoy(key: int) -> int:
    """A 4 KiB segment of root's at `key`, mode 0600: PostgreSQL cannot attach to it."""
    shmid = int(_libc.shmget(ctypes.c_int(key), ctypes.c_size_t(4096),
                             ctypes.c_int(0o600 | IPC_CREAT | IPC_EXCL)))  # fmt: skip
    if shmid < 0:
        err = ctypes.get_errno()
        pytest.skip(f"cannot make a System V segment at key {key}: {os.strerror(err)}")
    return shmid


def dsm_files_of(pids: list[int]) -> list[str]:
    """The /dev/shm files these processes map; a backend that has ended since it was listed
    maps nothing (the postmaster's own files are still found through it)."""
    found: set[str] = set()
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            found |= shared_memory_of(pid)
    return sorted(f"/dev/shm/{x.removeprefix('file ')}" for x in found if x.startswith("file "))


def remove_segment(shmid: int) -> None:
    _libc.shmctl(ctypes.c_int(shmid), ctypes.c_int(IPC_RMID), None)


def test_a_killed_servers_segment_at_a_shifted_key_is_freed(fresh_registry: Path) -> None:
    if os.geteuid() != 0 or bindir() is None:
        pytest.skip("needs root (PostgreSQL runs as postgres) and PostgreSQL's binaries")
    server = Postmaster(port=free_port(), settings={"shared_buffers": "16MB"})
    decoys: list[int] = []
    made: tuple[int, int] | None = None  # the server's segment (key, id)
    dsm: list[str] = []
    try:
        inode = os.stat(server.data).st_ino
        decoys = [make_decoy(_key(inode)), make_decoy(_key(inode + 1))]
        server.start()
        registry.own_server_memory(server.pid, server.data)  # as the product does at start
        made = registry.parse_shm_line((server.data / "postmaster.pid").read_text())
        assert made is not None
        key, shmid = made
        assert key not in (_key(inode), _key(inode + 1)), "the decoys did not move its key"
        recorded = registry.server_memory(server.data)
        assert [i.shmid for i in recorded if i.kind == "sysv"] == [shmid]
        assert [i for i in recorded if i.kind == "dsm"], "no control segment recorded"
        # every /dev/shm file its processes map: the control segment, which the postmaster
        # maps, and the segments its children made since (the statistics' area)
        dsm = dsm_files_of(postgres_pids_under(server.data))
        remove_segment(decoys.pop())  # the next key is free again: the tidying takes it
        assert server.proc is not None
        failover.kill_all(server.proc, server.data)
        assert read_sysv()[shmid].creator == server.pid and all(map(os.path.exists, dsm))

        bin_dir = bindir()
        assert bin_dir is not None
        version = program_version(bin_dir / "postgres")
        assert version is not None
        install = PgInstall(bin_dir, version, "test")
        pg = pwd.getpwnam("postgres")
        user = OsUser(pg.pw_name, pg.pw_uid, pg.pw_gid)
        left = failover.tidy_killed(install, user, server.data, server.base, server.log)

        assert left is None
        assert shmid not in read_sysv(), "the killed server's segment is left"
        assert [p for p in dsm if os.path.exists(p)] == []
        (decoy,) = decoys  # someone else's at the inode key: untouched
        assert (read_sysv()[decoy].key, read_sysv()[decoy].creator) == (_key(inode), os.getpid())
    finally:
        for decoy in decoys:
            remove_segment(decoy)
        if made is not None:  # the test's own server's, if the product left it
            segment = read_sysv().get(made[1])
            if segment is not None and segment.creator == server.pid:
                remove_segment(made[1])
        for path in dsm:
            Path(path).unlink(missing_ok=True)
        server.close()


def test_a_crashed_servers_segment_at_a_shifted_key_is_freed_before_it_starts_again(
    target_dir: Path, fresh_registry: Path
) -> None:
    """The `crash` event (LocalTarget.crash) on a server whose segment is at a key above its
    data directory's: the decoy that pushed it there is gone before the crash, so the new
    postmaster takes the inode key and would never visit the killed server's segment. It was
    left until `howfast cleanup`; now the crash removes it before the start."""
    if os.geteuid() != 0 or bindir() is None:
        pytest.skip("needs root (PostgreSQL runs as postgres) and PostgreSQL's binaries")
    target = LocalTarget(target_dir, choose_install(), settings={"shared_buffers": "16MB"})
    decoy: int | None = None
    dsm: list[str] = []
    made: tuple[int, int] | None = None  # the killed server's segment (key, id)
    try:
        target.start()
        data = target.server.dirs.data_dir
        inode = os.stat(data).st_ino
        target.server.stop_postmaster(signal.SIGINT)  # a clean stop frees the inode key...
        decoy = make_decoy(_key(inode))  # ...which someone else's segment takes
        target.server.start_postmaster()
        made = registry.parse_shm_line((data / "postmaster.pid").read_text())
        assert made is not None
        key, shmid = made
        assert key != _key(inode), "the decoy did not move the server's key"
        remove_segment(decoy)
        decoy = None
        killed = target.server.pid()
        assert killed is not None and read_sysv()[shmid].creator == killed
        dsm = dsm_files_of(postgres_pids_under(data))
        assert dsm, "no /dev/shm file mapped by the server"

        facts = target.crash()

        assert "shared_memory_left" not in facts, facts
        assert shmid not in read_sysv(), "the crashed server's segment is left"
        assert [p for p in dsm if os.path.exists(p)] == [], "its /dev/shm files are left"
        again = registry.parse_shm_line((data / "postmaster.pid").read_text())
        assert again is not None
        assert read_sysv()[again[1]].creator == target.server.pid() != killed
    finally:
        if decoy is not None:
            remove_segment(decoy)
        target.stop()
        if made is not None:  # the test's own server's, if the product left it
            segment = read_sysv().get(made[1])
            if segment is not None and segment.attached == 0 and segment.key == made[0]:
                remove_segment(made[1])
        for path in dsm:
            Path(path).unlink(missing_ok=True)
    assert postgres_pids_under(target_dir) == []
