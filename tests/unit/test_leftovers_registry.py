"""The registry of what each howfast process owns (targets/leftovers/registry.py) and how
cleanup reads it: a killed run's cluster that no process points at, a standby half copied
into a --standby-dir, a killed server's shared memory and a standby's cgroup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from howfast.errors import HowfastError
from howfast.store import liveness
from howfast.targets.leftovers import registry
from howfast.targets.leftovers.find import Action, candidate_directories, find
from howfast.targets.leftovers.groups import GONE, IN_USE, data_dir_argument
from howfast.targets.leftovers.machine import (
    CgroupDir,
    Entry,
    Process,
    RegistryFile,
    Snapshot,
    SysvSegment,
    TargetDir,
    parse_sysv_shm,
    read_registry,
    read_sysv,
    still_there,
)
from howfast.targets.leftovers.remove import remove_sysv
from howfast.targets.replicas.local import stop_group

D = "/var/tmp/bench"
CLUSTER = f"{D}/howfast-0c44b091"
KILLED = liveness.Writer("host", "boot", 3170, 100, "pid:[1]")
SYSV = registry.Owned("sysv", "32769", shmid=32769, key=5432001, postmaster=4000, ticks=7,
                      data_dir=f"{CLUSTER}/data")  # fmt: skip
DSM = registry.Owned("dsm", "/dev/shm/PostgreSQL.1804289383", postmaster=4000, ticks=7,
                     data_dir=f"{CLUSTER}/data")  # fmt: skip


def lines(*docs: object) -> str:
    return "".join(json.dumps(d) + "\n" for d in docs)


def record_file(state: str, *items: registry.Owned) -> RegistryFile:
    record = registry.Record("/root/.local/state/howfast/owned/3170-100.jsonl", KILLED, items)
    return RegistryFile(record.path, record, state, items)


def test_a_record_reads_its_writer_and_what_it_owns_and_skips_what_it_cannot_read():
    text = lines(
        {"writer": KILLED.document()},
        {"directory": CLUSTER, "role": "cluster"},
        {"cgroup": "/sys/fs/cgroup/howfast-standby-1234abcd", "data_dir": f"{CLUSTER}/s/data"},
        {"sysv": 32769, "key": 5432001, "postmaster": 4000, "ticks": 7,
         "data_dir": f"{CLUSTER}/data"},
        {"dsm": DSM.path, "postmaster": 4000, "ticks": 7, "data_dir": f"{CLUSTER}/data"},
        {"dsm": "/dev/shm/PostgreSQL.1/../../etc/passwd", "postmaster": 4000},  # not a dsm
        {"sysv": "32769", "key": 1},  # not a number
        {"directory": f"{D}/howfast-kept0000", "role": "cluster"},
        {"forget": f"{D}/howfast-kept0000"},
    ) + '{"directory": "/var/tmp/be'  # fmt: skip  # the last line, cut by a SIGKILL
    record = registry.parse_record(text)
    assert record.writer == KILLED
    assert [(i.kind, i.path) for i in record.items] == [
        ("directory", CLUSTER),
        ("cgroup", "/sys/fs/cgroup/howfast-standby-1234abcd"),
        ("sysv", "32769"),
        ("dsm", DSM.path),
    ]
    assert record.items[2] == SYSV and record.items[3] == DSM
    assert registry.parse_record("").items == () and registry.parse_record("[]").writer is None


def test_a_servers_segments_are_read_from_its_pid_file_and_maps():
    pid_file = "4000\n/var/tmp/bench/data\n1732800000\n5432\n/tmp\n\n  5432001  32769\nready\n"
    assert registry.parse_shm_line(pid_file) == (5432001, 32769)
    assert registry.parse_shm_line("4000\n/d\n1\n5432\n/tmp\n\n") is None  # still starting
    assert registry.parse_shm_line(pid_file.replace("5432001", "0")) is None
    maps = (
        "7f00-7f10 rw-s 00000000 00:1a 32769    /SYSV0052e2c1 (deleted)\n"
        "7f20-7f30 rw-s 00000000 00:19 12       /dev/shm/PostgreSQL.1804289383\n"
        "7f40-7f50 rw-s 00000000 00:19 13       /dev/shm/PostgreSQL.846930886 (deleted)\n"
        "7f60-7f70 r-xp 00000000 08:01 99       /usr/lib/postgresql/15/bin/postgres\n"
    )  # fmt: skip
    assert registry.parse_dsm_maps(maps) == [
        "/dev/shm/PostgreSQL.1804289383",
        "/dev/shm/PostgreSQL.846930886",
    ]
    shm = (
        "       key      shmid perms                  size  cpid  lpid nattch   uid   gid\n"
        "   5432001      32769   600                    56  4000  4011      0   106   106\n"
        "   5433001      32770   600                    56  4100  4100      3   106   106\n"
    )  # fmt: skip
    assert parse_sysv_shm(shm) == {
        32769: SysvSegment(32769, 5432001, 4000, 0),
        32770: SysvSegment(32770, 5433001, 4100, 3),
    }


def test_the_registry_lives_in_the_users_state_directory():
    # one file per process, named by its host too: a home shared by machines keeps them apart
    writer = liveness.Writer("db-1.lab/../x y", "boot", 42, 7, "pid:[1]")
    assert registry.file_name(writer) == "db-1.lab_.._x_y-42-7.jsonl"
    assert registry.registry_dir({"HOME": "/home/a"}) == Path("/home/a/.local/state/howfast/owned")
    assert registry.registry_dir({"HOME": "/home/a", "XDG_STATE_HOME": "/s"}) == Path(
        "/s/howfast/owned"
    )
    # a relative XDG_STATE_HOME is to be ignored (XDG Base Directory specification)
    assert registry.registry_dir({"HOME": "/h", "XDG_STATE_HOME": "s"}) == Path(
        "/h/.local/state/howfast/owned"
    )


def test_a_segment_is_still_there_only_while_its_id_names_what_its_server_made():
    assert still_there(SYSV, {32769: SysvSegment(32769, 5432001, 4000, 0)})
    assert not still_there(SYSV, {})
    assert not still_there(SYSV, {32769: SysvSegment(32769, 5432001, 5555, 0)})  # id reused
    assert not still_there(SYSV, {32769: SysvSegment(32769, 1, 4000, 0)})


def test_a_cluster_no_process_points_at_is_found_by_the_registry():
    """Killed while its server was down (a restart event): no process, no mount; the
    registry names the cluster, so its target directory is looked into."""
    snapshot = Snapshot(registry=[record_file("gone", registry.Owned("directory", CLUSTER))])
    assert candidate_directories(snapshot) == [D]
    snapshot.target_dirs = [TargetDir(D, True, None, (Entry(CLUSTER, False),))]
    (cluster,) = find(snapshot)
    assert cluster.kind == "cluster" and cluster.removable, cluster
    # The same, while its howfast runs: listed and left alone, whatever the lock says.
    snapshot.registry = [record_file("alive", registry.Owned("directory", CLUSTER))]
    (cluster,) = find(snapshot)
    assert cluster.state == IN_USE and "still runs" in cluster.reason


def test_a_partial_standby_and_its_base_backup_are_taken_down():
    """A standby half copied into --standby-dir (its own token), the base backup that a
    killed run left still writing into it: stopped first, then the directory removed."""
    standby = "/srv/standbys/howfast-5a5a5a5a"
    backup = Process(4321, 1, 9, 106,
                     ("/usr/lib/postgresql/15/bin/pg_basebackup", "-D", f"{standby}/data",
                      "-X", "stream", "-h", "/dev/shm/howfast-run-0c44b091-abcdefgh"),
                     "/root", "/usr/lib/postgresql/15/bin/pg_basebackup")  # fmt: skip
    assert data_dir_argument(backup) == f"{standby}/data"
    snapshot = Snapshot(
        processes=[backup],
        registry=[record_file("gone", registry.Owned("directory", standby, "standby"))],
    )
    assert candidate_directories(snapshot) == ["/srv/standbys"]
    snapshot.target_dirs = [TargetDir("/srv/standbys", True, None, (Entry(standby, False),))]
    found = find(snapshot)
    assert [(x.kind, x.path) for x in found] == [
        ("tool", "pg_basebackup PID 4321"),
        ("cluster", standby),
    ]
    assert all(x.state == GONE for x in found)
    assert found[0].actions[0].op == "stop-process" and found[0].actions[0].pid == 4321


def test_a_killed_servers_shared_memory_and_a_standbys_cgroup_join_its_cluster():
    standby_cgroup = "/sys/fs/cgroup/howfast-standby-77778888"
    standby_data = f"{CLUSTER}/standby_1/data"
    items = (
        registry.Owned("directory", CLUSTER, "cluster"),
        SYSV,
        DSM,
        registry.Owned("cgroup", standby_cgroup, data_dir=standby_data),
    )
    snapshot = Snapshot(
        target_dirs=[TargetDir(D, True, None, (Entry(CLUSTER, False),))],
        cgroups=[CgroupDir(standby_cgroup, False, True, ())],
        registry=[record_file("gone", *items)],
        sysv={32769: SysvSegment(32769, 5432001, 4000, 0)},
    )
    found = find(snapshot)
    assert [(x.kind, x.run) for x in found] == [
        ("shared memory", "howfast-0c44b091"),
        ("shared memory", "howfast-0c44b091"),
        ("cluster", "howfast-0c44b091"),
        ("cgroup", "howfast-0c44b091"),
    ]
    sysv, dsm = found[0], found[1]
    assert sysv.path == "System V segment 32769 (key 5432001)" and sysv.removable
    assert (sysv.actions[0].op, sysv.actions[0].pid, sysv.actions[0].extra) == (
        "remove-sysv", 4000, "32769:5432001",
    )  # fmt: skip
    assert dsm.path == DSM.path and dsm.actions[0].op == "unlink-dsm"
    # Scoped to the target directory, the standby's cgroup is still its cluster's (it was
    # a group of its own, out of every --target's scope, and stayed)
    assert [x.kind for x in find(snapshot, [D])] == [x.kind for x in found]
    # A live server's segments go when it shuts down: not listed; a reused id: not ours.
    server = Process(4000, 1, 7, 106, ("postgres",), f"{CLUSTER}/data", "/x/postgres", "S")
    snapshot.processes = [server]
    assert "shared memory" not in {x.kind for x in find(snapshot)}
    # a zombie has ended: its segments are left (PID 1 may collect it late)
    snapshot.processes = [Process(4000, 1, 7, 106, (), None, None, "Z")]
    assert [x.kind for x in find(snapshot)].count("shared memory") == 2
    snapshot.processes = []
    snapshot.sysv = {32769: SysvSegment(32769, 5432001, 9999, 0)}
    snapshot.registry = [record_file("gone", *items[:1], DSM)]
    assert [x.path for x in find(snapshot) if x.kind == "shared memory"] == [DSM.path]


def test_a_standbys_shared_memory_on_its_own_volume_joins_the_volume():
    """A standby on an emulated volume of its own (--standby-latency) has its data directory
    in no cluster directory: its killed server's memory goes with the volume, and a volume
    of which nothing else is left gets no volume row of its own."""
    volume = f"{D}/howfast-vol-5e6f7a8b"
    data = f"{volume}/mnt/standby_1/data"
    sysv = registry.Owned("sysv", "32771", shmid=32771, key=5433002, postmaster=4100, ticks=8,
                          data_dir=data)  # fmt: skip
    dsm = registry.Owned("dsm", "/dev/shm/PostgreSQL.846930886", postmaster=4100, ticks=8,
                         data_dir=data)  # fmt: skip
    snapshot = Snapshot(
        registry=[record_file("gone", sysv, dsm)],
        sysv={32771: SysvSegment(32771, 5433002, 4100, 0)},
    )
    found = find(snapshot)
    assert [(x.kind, x.path, x.run) for x in found] == [
        ("shared memory", "System V segment 32771 (key 5433002)", "howfast-vol-5e6f7a8b"),
        ("shared memory", dsm.path, "howfast-vol-5e6f7a8b"),
    ]
    assert all(x.state == GONE and x.removable for x in found)
    assert [(a.op, a.path, a.pid, a.extra) for x in found for a in x.actions] == [
        ("remove-sysv", data, 4100, "32771:5433002"),
        ("unlink-dsm", dsm.path, 4100, data),
    ]
    # its workspace still there: the volume is listed, and taken down before the memory
    snapshot.target_dirs = [TargetDir(D, True, None, (Entry(volume, False, 2**20),))]
    found = find(snapshot)
    assert [(x.kind, x.path) for x in found] == [
        ("volume", volume),
        ("shared memory", "System V segment 32771 (key 5433002)"),
        ("shared memory", dsm.path),
    ]
    assert {x.run for x in found} == {"howfast-vol-5e6f7a8b"}
    # the segment gone, the file too: nothing of that volume's run is listed
    snapshot.target_dirs, snapshot.sysv = [], {}
    snapshot.registry = [record_file("gone", sysv)]
    assert find(snapshot) == []


def test_pid_scope_keeps_what_one_howfast_process_left():
    other = liveness.Writer("host", "boot", 999, 5, "pid:[1]")
    mine = record_file("gone", registry.Owned("directory", CLUSTER))
    theirs_path = f"{D}/howfast-11112222"
    theirs = RegistryFile("/x/999-5.jsonl",
                          registry.Record("/x/999-5.jsonl", other,
                                          (registry.Owned("directory", theirs_path),)),
                          "gone", (registry.Owned("directory", theirs_path),))  # fmt: skip
    snapshot = Snapshot(
        target_dirs=[TargetDir(D, True, None, (Entry(CLUSTER, False), Entry(theirs_path, False)))],
        registry=[mine, theirs],
    )
    assert {x.path for x in find(snapshot)} == {CLUSTER, theirs_path}
    assert [x.path for x in find(snapshot, pid=3170)] == [CLUSTER]
    assert find(snapshot, pid=4242) == []


def test_this_process_records_what_it_owns_and_its_file_goes_when_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """In a child process (the registry is per process): it records a directory before
    making it, then removes it; at exit its file is gone. One that keeps a directory leaves
    its file, read as alive while it runs and gone after."""
    state = tmp_path / "state"
    cluster = tmp_path / "howfast-0c44b091"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from howfast.targets.leftovers import registry\n"
        "p = Path(sys.argv[1])\n"
        "registry.own_directory(p, 'cluster')\n"
        "p.mkdir()\n"
        "print('made', flush=True)\n"
        "if sys.argv[2] == 'remove':\n"
        "    p.rmdir()\n"
        "else:\n"
        "    sys.stdin.readline()\n"
    )
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    done = subprocess.run([sys.executable, "-c", script, str(cluster), "remove"], env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout == "made\n" and list((state / "howfast/owned").iterdir()) == []
    child = subprocess.Popen([sys.executable, "-c", script, str(cluster), "keep"], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == "made\n"
        here = liveness.this_process()
        (found,) = read_registry(here, {}, state / "howfast/owned")
        assert found.record.writer is not None and found.record.writer.pid == child.pid
        assert found.owner_state == "alive"
        assert found.present == (registry.Owned("directory", str(cluster), "cluster"),)
    finally:
        child.kill()
        child.wait()
    (found,) = read_registry(here, {}, state / "howfast/owned")
    assert found.owner_state == "gone" and found.present  # killed: nothing tidied


def test_a_process_group_is_stopped_whole():
    """pg_basebackup's WAL streamer is a child it forks: the group goes, not only its head."""
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    stop_group(proc)  # type: ignore[arg-type]
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 5  # reaped by init, its new parent
    while liveness.pid_exists(child) and not liveness.is_zombie(child):
        assert time.monotonic() < deadline, f"PID {child} still runs"
        time.sleep(0.05)


MAKE_SEGMENT = """
import ctypes, os, sys
from howfast.store import liveness
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(int(sys.argv[1]), 4096, 0o600 | 0o1000 | 0o2000)  # IPC_CREAT | IPC_EXCL
print(shmid, os.getpid(), liveness.process_start_ticks(os.getpid()))
"""


def test_a_gone_servers_system_v_segment_is_removed_only_while_it_is_the_one_it_made():
    """A real segment, made by a process that then ends (as a killed postmaster's)."""
    key = 0x48460000 + os.getpid() % 0xFFFF  # "HF": unlikely to be anyone else's
    made = subprocess.run([sys.executable, "-c", MAKE_SEGMENT, str(key)], capture_output=True,
                          text=True, check=True)  # fmt: skip
    shmid, creator, ticks = (int(x) for x in made.stdout.split())
    if shmid < 0:
        pytest.skip("no System V shared memory here")
    try:
        assert read_sysv()[shmid] == SysvSegment(shmid, key, creator, 0)
        # another key under that id (reused since): not ours, left
        remove_sysv(Action("remove-sysv", "", creator, ticks, extra=f"{shmid}:{key + 1}"))
        assert shmid in read_sysv()
        # its creator still running: refused (here: this process, as if it had made it)
        me = os.getpid()
        with pytest.raises(HowfastError, match="still runs"):
            remove_sysv(Action("remove-sysv", "", me, liveness.process_start_ticks(me),
                               extra=f"{shmid}:{key}"))  # fmt: skip
        remove_sysv(Action("remove-sysv", "", creator, ticks, extra=f"{shmid}:{key}"))
        assert shmid not in read_sysv()
    finally:
        subprocess.run(["ipcrm", "-m", str(shmid)], capture_output=True, check=False)
