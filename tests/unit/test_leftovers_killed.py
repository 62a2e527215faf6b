"""What a run removes itself of a server it killed (targets/leftovers/killed.py): the System
V segment and /dev/shm files the registry recorded for it, with the remover's checks, and
the segments a PostgreSQL control segment lists (dsm_control.py)."""

from __future__ import annotations

import ctypes
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from howfast.targets.leftovers import registry
from howfast.targets.leftovers.dsm_control import MAGIC, listed_segments
from howfast.targets.leftovers.killed import free_killed_memory
from howfast.targets.leftovers.machine import read_sysv

IPC_CREAT, IPC_EXCL, IPC_RMID = 0o1000, 0o2000, 0


def control_segment(items: list[tuple[int, int]], maxitems: int = 8, item: int = 40) -> bytes:
    """A control segment as PostgreSQL lays it out (64-bit): header, padding, items."""
    data = bytearray(struct.pack("=III", MAGIC, len(items), maxitems) + bytes(4))
    for i in range(maxitems):
        handle, refcnt = items[i] if i < len(items) else (0, 0)
        data += struct.pack("=II", handle, refcnt) + bytes(item - 8)
    return bytes(data)


def test_a_control_segment_lists_its_live_segments_files():
    # PostgreSQL 15's layout: 40-byte items; 674 slots made the 26976-byte file seen here
    assert len(control_segment([], maxitems=674)) == 26976
    data = control_segment([(1428802640, 2), (77, 3), (20, 0), (3000000000, 1)])
    # a reference count of 0 is a free slot; an odd handle a part of the main region
    assert listed_segments(data) == [
        "/dev/shm/PostgreSQL.1428802640",
        "/dev/shm/PostgreSQL.3000000000",
    ]
    # before PostgreSQL 14: 24-byte items, and any handle has a file
    assert listed_segments(control_segment([(77, 2)], item=24)) == ["/dev/shm/PostgreSQL.77"]
    # not a control segment: another magic, a size that is not the slots', nitems > maxitems
    assert listed_segments(data.replace(struct.pack("=I", MAGIC), b"\0\0\0\0", 1)) == []
    assert listed_segments(data + bytes(8)) == [] and listed_segments(data[:20]) == []
    assert listed_segments(struct.pack("=III", MAGIC, 9, 8) + data[12:]) == []
    assert listed_segments(bytes(2**20)) == [] and listed_segments(b"") == []


MAKE_SEGMENT = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(int(sys.argv[1]), 4096, 0o600 | 0o1000 | 0o2000), os.getpid())
"""


def record_server(tmp_path: Path, pid: int, key: int, shmid: int, dsm: str) -> Path:
    """What own_server_memory reads of a server `pid` (its postmaster.pid, its maps), here
    written by the test: its data directory."""
    data_dir = tmp_path / f"data-{pid}"
    data_dir.mkdir()
    (data_dir / "postmaster.pid").write_text(
        f"{pid}\n{data_dir}\n1732800000\n5432\n/tmp\n\n  {key}  {shmid}\nready\n"
    )
    proc = tmp_path / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "maps").write_text(f"7f20-7f30 rw-s 00000000 00:19 12       {dsm}\n")
    registry.own_server_memory(pid, data_dir, proc)
    return data_dir


def test_a_killed_servers_recorded_memory_is_removed_and_what_cannot_be_is_said(
    tmp_path: Path, fresh_registry: Path
):
    """A real segment made by a process that then ended (as a killed postmaster's), and a
    control segment in /dev/shm listing another file; then a segment whose recorded creator
    still runs: left, and said."""
    key = 0x48470000 + os.getpid() % 0xFFFF  # "HG": unlikely to be anyone else's
    made = subprocess.run([sys.executable, "-c", MAKE_SEGMENT, str(key)], capture_output=True,
                          text=True, check=True)  # fmt: skip
    shmid, creator = (int(x) for x in made.stdout.split())
    if shmid < 0:
        pytest.skip("no System V shared memory here")
    handle = 2 * (0x4000_0000 + os.getpid())  # even, as PostgreSQL's are
    control = Path(f"/dev/shm/PostgreSQL.{handle}")
    listed = Path(f"/dev/shm/PostgreSQL.{handle + 2}")
    libc = ctypes.CDLL(None, use_errno=True)
    mine = -1
    try:
        with control.open("xb") as out:
            out.write(control_segment([(handle + 2, 2)]))
        listed.touch(exist_ok=False)
        data_dir = record_server(tmp_path, creator, key, shmid, str(control))
        assert free_killed_memory(data_dir) is None
        assert shmid not in read_sysv() and not control.exists() and not listed.exists()
        assert free_killed_memory(data_dir) is None  # all gone: nothing to say
        # its creator still runs (this process, as if it had made it): left alone, and said
        mine = int(libc.shmget(key, 4096, 0o600 | IPC_CREAT | IPC_EXCL))
        assert mine >= 0
        data_dir = record_server(tmp_path, os.getpid(), key, mine, str(control))
        said = free_killed_memory(data_dir)
        assert said is not None and f"System V segment {mine} (key {key})" in said
        assert "still runs" in said and "howfast cleanup" in said and mine in read_sysv()
    finally:
        for shm in (shmid, mine):
            if shm >= 0:
                libc.shmctl(shm, IPC_RMID, None)
        control.unlink(missing_ok=True)
        listed.unlink(missing_ok=True)
