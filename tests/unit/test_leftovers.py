"""`howfast cleanup`'s pure part: from what this machine shows (processes, mounts, loop devices,
locks, directories: built here as data, or parsed from recorded /proc files), which leftovers
belong to a run whose howfast is gone, and what taking them down does, in which order."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from howfast.store import liveness
from howfast.targets.leftovers import marks, names
from howfast.targets.leftovers.find import candidate_directories, find
from howfast.targets.leftovers.groups import GONE, IN_USE, KEPT, UNKNOWN, private_state
from howfast.targets.leftovers.machine import (
    CgroupDir,
    Entry,
    Loop,
    PrivateDir,
    Process,
    Snapshot,
    TargetDir,
    parse_flock_holders,
    parse_mounts,
    read_private_dirs,
    read_target_dir,
)

DATA = Path(__file__).parent.parent / "data" / "proc"
D = "/var/tmp/bench"
VOL = f"{D}/howfast-vol-071aee8f"
SHM_VOL = "/dev/shm/howfast-vol-071aee8f-z4_d29ax"
INNER = f"{VOL}/mnt/howfast-0c44b091"
KILLED = liveness.Writer("host", "boot", 3170, 100, "pid:[1]")


def owner(state: str, directories: tuple[str, ...] = (D,), token: str | None = None) -> dict:
    record = marks.OwnerRecord(KILLED, directories, token)
    return {"owner": record, "owner_state": state}


def postgres(pid: int, ppid: int, cwd: str, uid: int = 106) -> Process:
    exe = "/usr/lib/postgresql/15/bin/postgres"
    return Process(pid, ppid, 1000 + pid, uid, (exe, "-D", cwd), cwd, exe)


def killed_volume_snapshot(*, lock_holder: str | None = None) -> Snapshot:
    """An emulated-volume run killed with SIGKILL, as seen a moment later: nbdkit and nbdfuse
    still up (they may be: see docs/commands/cleanup.md), the server running on the volume."""
    nbdkit = Process(
        3199, 1, 5, 0,
        ("nbdkit", "--foreground", "--unix", f"{SHM_VOL}/nbdkit.sock", "python",
         "/x/delay_plugin.py", f"file={VOL}/volume.img", "delay-ms=1.0"),
        "/root", "/usr/sbin/nbdkit",
    )  # fmt: skip
    nbdfuse = Process(
        3200, 1, 6, 0,
        ("nbdfuse", "--pidfile", f"{SHM_VOL}/nbdfuse.pid", f"{SHM_VOL}/fuse", "--unix",
         f"{SHM_VOL}/nbdkit.sock"),
        "/root", "/usr/bin/nbdfuse",
    )  # fmt: skip
    data = f"{INNER}/data"
    recorded = parse_mounts((DATA / "mounts-killed-emulated-volume.txt").read_text())
    return Snapshot(
        processes=[nbdkit, nbdfuse, postgres(3469, 1, data), postgres(3470, 3469, data)],
        mounts=[replace(m, point=m.point.replace("/var/tmp/wtc-exp/bench", D)) for m in recorded],
        loops=[Loop("/dev/loop0", f"{SHM_VOL}/fuse/nbd")],
        private_dirs=[
            PrivateDir(SHM_VOL, mtime=10.0, **owner("gone", (D,), "071aee8f")),
            PrivateDir(
                "/dev/shm/howfast-run-0c44b091-vjkv_tyc",
                mtime=10.0,
                **owner("gone", (f"{VOL}/mnt",), "0c44b091"),
            ),
            PrivateDir("/dev/shm/howfast-work-3170-3qps38nb", mtime=10.0, **owner("gone", ())),
        ],
        target_dirs=[
            TargetDir(D, True, lock_holder, (Entry(VOL, False, 57 * 2**20, ("howfast-0c44b091",)),))
        ],
        cgroups=[CgroupDir("/sys/fs/cgroup/blkio/howfast-io-0c44b091", False, True, (3469, 3470))],
        users={106: "postgres"},
        euid=0,
    )


def by_kind(leftovers: list) -> dict[str, list]:
    found: dict[str, list] = {}
    for leftover in leftovers:
        found.setdefault(leftover.kind, []).append(leftover)
    return found


def test_a_killed_emulated_run_is_taken_down_top_to_bottom():
    leftovers = find(killed_volume_snapshot())
    assert [x.kind for x in leftovers] == [
        "volume", "server", "private directory", "private directory", "cgroup",
    ]  # fmt: skip
    assert all(x.state == GONE and x.removable for x in leftovers)
    volume, server, work_dir, run_dir, cgroup = leftovers
    # The server, named by its real data directory on the volume, with the command that
    # stops it by hand as its OS user. With --yes its volume goes first: its I/O path
    # (nbdfuse, then nbdkit), then the server on it at once, then the layers top to bottom.
    assert server.path == f"{INNER}/data" and server.run == "howfast-vol-071aee8f"
    assert server.stop_command == (
        f"sudo -u postgres /usr/lib/postgresql/15/bin/pg_ctl -D {INNER}/data stop -m fast"
    )
    assert [(a.op, a.pid) for a in server.actions] == [("stop-server", 3469)]
    assert [(a.op, a.path or a.pid) for a in volume.actions] == [
        ("stop-process", 3200),  # nbdfuse, the client, before nbdkit
        ("stop-process", 3199),
        ("kill-servers", VOL),
        ("no-processes", VOL),
        ("umount", f"{VOL}/mnt"),
        ("detach-loop", "/dev/loop0"),  # by the device: nbdfuse's exit took its file's path
        ("detach-loops", SHM_VOL),  # looked up again then: a losetup may have made one since
        ("unmount-fuse", f"{SHM_VOL}/fuse"),
        ("rmtree", SHM_VOL),
        ("rmtree", VOL),
    ]
    assert "image 57 MiB" in volume.details and "loop device /dev/loop0" in volume.details
    assert volume.directories == [D]  # removal holds its run lock
    # The cluster on the volume belongs to the volume's run: its private directory too, and
    # its cgroup (once its processes are gone) ...
    assert run_dir.path.startswith("/dev/shm/howfast-run-0c44b091-")
    assert cgroup.path.endswith("howfast-io-0c44b091") and cgroup.details == [
        "processes 3469, 3470"
    ]
    # ... and the work directory of the killed howfast, by its owner record.
    assert work_dir.path == "/dev/shm/howfast-work-3170-3qps38nb" and work_dir.run == "PID 3170"


def test_a_live_runs_things_are_listed_and_left_alone():
    """A held run lock wins over anything that says gone: nothing is removable, and no
    command to stop the live server is suggested."""
    leftovers = find(killed_volume_snapshot(lock_holder="run 7 (PID 4321) since 2026-01-01"))
    server = by_kind(leftovers)["server"][0]
    assert all(not x.removable for x in leftovers if x.kind != "private directory")
    assert server.state == IN_USE and server.stop_command is None
    assert server.reason == "in use by run 7 (PID 4321)"
    # The work directory is not the live run's: its own owner is gone.
    privates = {Path(x.path).name: x.removable for x in by_kind(leftovers)["private directory"]}
    assert privates == {"howfast-run-0c44b091-vjkv_tyc": False, "howfast-work-3170-3qps38nb": True}


def test_a_private_directory_whose_owner_runs_is_left_alone_whatever_the_rest_says():
    snapshot = killed_volume_snapshot()
    snapshot.private_dirs[2] = PrivateDir(
        "/dev/shm/howfast-work-3170-3qps38nb", mtime=10.0, **owner("alive", ())
    )
    work = [x for x in find(snapshot) if "howfast-work" in x.path]
    assert [(x.state, x.removable) for x in work] == [(IN_USE, False)]


def test_a_volume_without_any_directory_or_record_goes_by_whose_child_nbdkit_is():
    """As seen on the test machine: a run with an hour of added delay, killed while losetup
    waited for the volume's first flush; its test had removed the target directory, and its
    howfast (an older version) wrote no owner record. nbdkit, nbdfuse and losetup now belong
    to PID 1: their howfast is gone. That losetup holds the kernel's loop lock: every other
    losetup on the machine waits until it is stopped (its volume's nbdfuse and nbdkit first,
    which fails the flush it waits for)."""
    shm = "/dev/shm/howfast-vol-a37a4775-su4iwbu3"
    image = "/var/tmp/howfast-target-go4omvar/bench/howfast-vol-a37a4775/volume.img"
    init = Process(1, 0, 1, 0, ("/sbin/init",), "/", "/sbin/init")
    nbdkit = Process(7814, 1, 50, 0, ("nbdkit", "--foreground", "--unix", f"{shm}/nbdkit.sock",
                     "python", "/x/delay_plugin.py", f"file={image}", "delay-ms=3600000.0"),
                     "/tmp", "/usr/sbin/nbdkit")  # fmt: skip
    nbdfuse = Process(7815, 1, 51, 0, ("nbdfuse", "--pidfile", f"{shm}/nbdfuse.pid",
                      f"{shm}/fuse", "--unix", f"{shm}/nbdkit.sock"), "/tmp",
                      "/usr/bin/nbdfuse")  # fmt: skip
    losetup = Process(7890, 1, 52, 0, ("losetup", "--find", "--show", "--direct-io=on",
                      f"{shm}/fuse/nbd"), "/tmp", "/usr/sbin/losetup")  # fmt: skip
    fuse = parse_mounts(f"/dev/fuse {shm}/fuse fuse rw,nosuid,nodev,relatime 0 0\n")
    snapshot = Snapshot(
        processes=[init, nbdkit, nbdfuse, losetup],
        mounts=fuse,
        private_dirs=[PrivateDir(shm, None, "unknown", 10.0)],
    )
    (volume,) = find(snapshot)
    assert (volume.kind, volume.state, volume.path) == ("volume", GONE, shm)
    assert volume.reason == "its howfast is gone: PID 1 adopted its nbdkit (PID 7814)"
    assert [(a.op, a.pid or a.path) for a in volume.actions] == [
        ("stop-process", 7815), ("stop-process", 7814), ("stop-process", 7890),
        ("detach-loops", shm), ("unmount-fuse", f"{shm}/fuse"), ("rmtree", shm),
    ]  # fmt: skip
    # The same processes while their howfast runs: its children, left alone.
    parent = Process(7451, 1, 40, 0, ("/venv/bin/python", "-m", "howfast", "run"), "/", None)
    alive = [init, parent] + [replace(p, ppid=7451) for p in (nbdkit, nbdfuse, losetup)]
    (volume,) = find(replace(snapshot, processes=alive))
    assert (volume.state, volume.reason) == (IN_USE, "its howfast (PID 7451) still runs")
    # A parent that is neither says nothing: the unmarked directory stays unknown.
    other = [init, replace(parent, argv=("/bin/sh",)), *alive[2:]]
    assert find(replace(snapshot, processes=other))[0].state == UNKNOWN


def test_a_cgroup_without_an_owner_lock_or_with_a_held_one_is_never_removed():
    snapshot = killed_volume_snapshot()
    path = "/sys/fs/cgroup/blkio/howfast-io-0c44b091"
    for held, exists, state in ((True, True, IN_USE), (False, False, UNKNOWN)):
        snapshot.cgroups = [CgroupDir(path, held, exists, ())]
        (cgroup,) = by_kind(find(snapshot))["cgroup"]
        assert (cgroup.state, cgroup.removable) == (state, False)


def test_kept_and_unmarked_clusters_are_left_alone():
    kept = Entry(f"{D}/howfast-1234abcd", kept=True)
    foreign = TargetDir("/srv/other", False, None, (Entry("/srv/other/howfast-5678abcd", False),))
    snapshot = Snapshot(target_dirs=[TargetDir(D, True, None, (kept,)), foreign])
    leftovers = {x.path: x for x in find(snapshot)}
    assert leftovers[kept.path].state == KEPT and not leftovers[kept.path].removable
    other = leftovers["/srv/other/howfast-5678abcd"]
    assert other.state == UNKNOWN and "no howfast marker" in other.reason
    # A killed run's plain cluster beside the kept one goes, the kept one stays.
    gone = Entry(f"{D}/howfast-9999abcd", kept=False)
    snapshot.target_dirs[0] = TargetDir(D, True, None, (kept, gone))
    assert [x.path for x in find(snapshot) if x.removable] == [gone.path]


def test_work_directories_of_older_howfast_versions_go_by_the_pid_in_their_name():
    path = "/dev/shm/howfast-work-3170-3qps38nb"
    gone = PrivateDir(path, None, "unknown", mtime=100.0, owner_started=None)
    assert private_state(gone)[0] == GONE  # no process has that PID
    reused = PrivateDir(path, None, "unknown", mtime=100.0, owner_started=150.0)
    assert private_state(reused) == (
        GONE,
        "its howfast (PID 3170) is gone (a newer process has that PID)",
    )
    maybe = PrivateDir(path, None, "unknown", mtime=100.0, owner_started=50.0)
    assert private_state(maybe)[0] == UNKNOWN
    held = private_state(maybe, {3170: "run 2 (PID 3170)"})
    assert held == (IN_USE, "in use by run 2 (PID 3170)")
    run_dir = PrivateDir("/dev/shm/howfast-run-0c44b091-vjkv_tyc", None, "unknown", 100.0)
    assert private_state(run_dir)[0] == UNKNOWN  # no PID, no record: cannot tell


def test_scope_keeps_the_runs_on_the_given_directory_and_what_their_howfast_left_elsewhere():
    snapshot = killed_volume_snapshot()
    other = "/srv/b"
    entry = Entry(f"{other}/howfast-aaaabbbb", False)
    snapshot.target_dirs.append(TargetDir(other, True, None, (entry,)))
    snapshot.private_dirs.append(
        PrivateDir("/dev/shm/howfast-work-999-abcdefgh", None, "unknown", 1.0, None)
    )
    everything = {x.path for x in find(snapshot)}
    assert f"{other}/howfast-aaaabbbb" in everything
    assert "/dev/shm/howfast-work-999-abcdefgh" in everything
    scoped = {x.path for x in find(snapshot, [D])}
    assert f"{other}/howfast-aaaabbbb" not in scoped
    assert "/dev/shm/howfast-work-999-abcdefgh" not in scoped
    assert "/dev/shm/howfast-work-3170-3qps38nb" in scoped  # the same howfast's (record)
    assert {VOL, f"{INNER}/data"} <= scoped
    assert {x.path for x in find(snapshot, [other])} == {f"{other}/howfast-aaaabbbb"}


def test_candidate_directories_come_from_what_the_machine_points_at():
    snapshot = killed_volume_snapshot()
    snapshot.target_dirs = []
    fleet_server = postgres(77, 1, "/srv/f/howfast-fleet-0badcafe/s-c-1/howfast-12345678/data")
    snapshot.processes.append(fleet_server)
    assert candidate_directories(snapshot, ["/given"]) == ["/given", "/srv/f", D]


def test_names():
    assert names.target_entry_kind("howfast-0c44b091") == "cluster"
    assert names.target_entry_kind("howfast-vol-071aee8f") == "volume"
    assert names.target_entry_kind("howfast-fleet-071aee8f") == "fleet"
    assert names.target_entry_kind("howfast-note.txt") is None
    assert names.target_entry_kind("howfast-0C44B091") is None
    assert names.private_kind("howfast-work-3170-3qps38nb") == "work"
    assert names.private_kind("howfast-vol-071aee8f-z4_d29ax") == "volume"
    assert names.private_kind("howfast-cgroup-howfast-io-eb601609.lock") is None
    assert names.cgroup_of_lock("howfast-cgroup-howfast-io-eb601609.lock") == "howfast-io-eb601609"
    assert names.cluster_of(f"{INNER}/data/base") == (INNER, "0c44b091")
    assert names.volume_run_dir_of(f"{SHM_VOL}/fuse/nbd") == (SHM_VOL, "071aee8f")
    assert names.is_within("/a/b", "/a") and not names.is_within("/ab", "/a")


def test_proc_locks_flock_holders_recorded():
    holders = parse_flock_holders((DATA / "locks-recorded.txt").read_text())
    # FLOCK write locks only (howfast's kind), device numbers read as hexadecimal
    assert holders == {(0, 0x1B, 1918): 10511, (7, 0x1EF4, 2): 10511}
    assert parse_flock_holders(" 1: FLOCK  ADVISORY  WRITE 9 00:1b:5 0 EOF\n -> junk") == {
        (0, 27, 5): 9
    }


def test_mounts_recorded_after_a_kill_and_escaped_paths():
    mounts = parse_mounts((DATA / "mounts-killed-emulated-volume.txt").read_text())
    fuse, volume = mounts[-2:]
    assert (fuse.fstype, fuse.point) == ("fuse", f"{SHM_VOL}/fuse")
    assert volume.point.endswith("howfast-vol-071aee8f/mnt") and "emergency_ro" in volume.options
    (spaced,) = parse_mounts("/dev/loop3 /mnt/my\\040disk ext4 rw 0 0\n")
    assert spaced.point == "/mnt/my disk"


def test_owner_records_name_this_process_and_a_missing_one_reads_as_none(tmp_path: Path):
    marks.write_owner(tmp_path, directories=[tmp_path / "a"], token="0c44b091")
    record = marks.read_owner(tmp_path)
    assert record is not None and record.writer == liveness.this_process()
    assert record.directories == (str(tmp_path / "a"),) and record.token == "0c44b091"
    assert json.loads((tmp_path / marks.OWNER).read_text())["token"] == "0c44b091"
    assert marks.read_owner(tmp_path / "nowhere") is None
    assert marks.parse_owner("not json") is None and marks.parse_owner("[]") is None


def test_reading_private_and_target_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The readers on real directories: an owner record of this process reads `alive`, one
    of a process that has ended `gone`; a target directory's lock, held by a real flock."""
    import fcntl

    base = tmp_path / "shm"
    mine, ended = base / "howfast-run-0c44b091-abcdefgh", base / "howfast-work-1-abcdefgh"
    for directory in (mine, ended, base / "howfast-other"):
        directory.mkdir(parents=True)
    marks.write_owner(mine, directories=[tmp_path], token="0c44b091")
    child = subprocess.Popen(["true"])
    child.wait()
    here = liveness.this_process()
    gone = liveness.Writer(here.host, here.boot_id, child.pid, 1, here.pid_ns)
    (ended / marks.OWNER).write_text(json.dumps({"writer": gone.document(), "directories": []}))
    monkeypatch.setattr("howfast.targets.leftovers.machine.private_bases", lambda: [base])
    found = {Path(p.path).name: p.owner_state for p in read_private_dirs(liveness.this_process())}
    assert found == {mine.name: "alive", ended.name: "gone"}

    target = tmp_path / "bench"
    (target / "howfast-vol-071aee8f" / "mnt" / "howfast-0c44b091").mkdir(parents=True)
    (target / ".howfast-owned").write_text("{}\n")
    read = read_target_dir(target, None)
    assert read is not None and read.owned and read.holder is None
    assert read.entries[0].inner == ("howfast-0c44b091",)
    fd = os.open(target, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        from howfast.targets.leftovers.machine import flock_holders

        held = read_target_dir(target, flock_holders())
        assert held is not None and held.holder == f"a howfast run (PID {os.getpid()})"
        assert held.holder_pid == os.getpid()
    finally:
        os.close(fd)


def test_a_zombie_owner_is_gone():
    """A howfast killed by a parent that has not collected it yet (or never will: a killed
    shell's child, adopted by an init that does not reap) still shows its PID and start time,
    as a zombie: it is gone, and a process of its found that way is no longer alive."""
    from howfast.targets.k8s.cleanup import classify
    from howfast.targets.leftovers.machine import owner_state
    from howfast.targets.leftovers.remove import _alive

    child = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 10
        while not liveness.is_zombie(child.pid):
            assert time.monotonic() < deadline, "the child never ended"
            time.sleep(0.01)
        here = liveness.this_process()
        ticks = liveness.process_start_ticks(child.pid)
        writer = liveness.Writer(here.host, here.boot_id, child.pid, ticks, here.pid_ns)
        assert not liveness.is_gone(writer, here)  # the store's test alone cannot tell
        assert owner_state(marks.OwnerRecord(writer), here) == "gone"
        assert classify(json.dumps(writer.document()), here)[0] == "gone"  # a cluster's run too
        assert not _alive(child.pid, ticks)
    finally:
        child.wait()
    assert not liveness.is_zombie(os.getpid())


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: makes a loop device")
def test_detach_loops_finds_the_devices_made_since_the_listing(tmp_path: Path):
    """A volume's loop devices are looked up when they are detached: one a losetup made after
    cleanup looked (it was waiting on the volume) goes too; one on another file stays."""
    from howfast.targets.leftovers.find import Action
    from howfast.targets.leftovers.machine import read_loops
    from howfast.targets.leftovers.remove import detach_loops

    private = tmp_path / "howfast-vol-0badcafe-abcdefgh"
    private.mkdir()
    made = []
    for file in (private / "nbd", tmp_path / "other.img"):
        with file.open("wb") as f:
            f.truncate(8 * 2**20)
        made.append(subprocess.run(["losetup", "--find", "--show", str(file)], check=True,
                                   capture_output=True, text=True).stdout.strip())  # fmt: skip
    try:
        detach_loops(Action("detach-loops", str(private)))
        left = {loop.device for loop in read_loops()}
        assert made[0] not in left and made[1] in left
    finally:
        for device in made:
            subprocess.run(["losetup", "--detach", device], capture_output=True)


def test_a_loop_device_whose_fuse_file_was_detached_lazily_is_still_the_volumes():
    """nbdfuse, stopped first, may detach its FUSE mount lazily: the loop device's backing
    file then reads "/nbd" in sysfs, and detaching it by its old path would leave it attached
    for good (one per clean-clone run was left so)."""
    from howfast.targets.leftovers.remove import backed_by

    fuse = "/dev/shm/howfast-vol-071aee8f-z4_d29ax/fuse"
    file = f"{fuse}/nbd"
    assert backed_by(file, file, [fuse])
    assert backed_by("/nbd", file, [])  # its FUSE mount point is gone: the detached form
    assert not backed_by("/nbd", file, [fuse])  # still mounted: another volume's orphan
    assert not backed_by(None, file, [])  # detached already
    assert not backed_by("/var/tmp/other.img", file, [])
