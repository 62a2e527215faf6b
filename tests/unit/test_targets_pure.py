"""Pure parts of targets: mountinfo and sysfs parsing, version strings, conf quoting,
directory claims, DSN parsing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from howfast.errors import UsageError
from howfast.machine.fsinfo import block_device, mount_for, parse_mountinfo, parse_scheduler
from howfast.machine.pgbin import parse_version
from howfast.targets.claim import MARKER, check_directory, claim_directory
from howfast.targets.dsn import parse_dsn
from howfast.targets.leftovers.marks import KEPT
from howfast.targets.local import check_earlier_clusters, conf_line

DATA = Path(__file__).parent.parent / "data" / "proc"


def test_mountinfo_picks_longest_prefix_and_last_stacked_mount():
    entries = parse_mountinfo((DATA / "mountinfo-debian12.txt").read_text())
    root = mount_for(Path("/var/tmp/x"), entries)
    assert root is not None and (root.fstype, root.source) == ("ext4", "/dev/vda")
    nvme = mount_for(Path("/mnt/nvme/bench"), entries)
    assert nvme is not None and nvme.fstype == "xfs" and nvme.device == "259:2"
    assert "noatime" in nvme.options and "inode64" in nvme.options
    shm = mount_for(Path("/dev/shm/a"), entries)
    assert shm is not None and shm.device == "0:27"  # the upper of two stacked mounts
    spaced = mount_for(Path("/mnt/loop disk/b"), entries)
    assert spaced is not None and spaced.source == "/dev/loop3"
    # /mnt/nvmex is not inside /mnt/nvme
    other = mount_for(Path("/mnt/nvmex"), entries)
    assert other is not None and other.mount_point == "/"


def test_scheduler_selected_value():
    assert parse_scheduler("none [mq-deadline] kyber bfq") == "mq-deadline"
    assert parse_scheduler("[none] mq-deadline") == "none"
    assert parse_scheduler("none") == "none"


def _fake_sys(tmp_path: Path) -> Path:
    """A sysfs-shaped tree: nvme0n1 with partition p2, and loop3 backed by a file."""
    sys_root = tmp_path / "sys"
    disk = sys_root / "devices" / "pci" / "nvme0n1"
    part = disk / "nvme0n1p2"
    part.mkdir(parents=True)
    (part / "partition").write_text("2\n")
    (disk / "queue").mkdir()
    (disk / "queue" / "rotational").write_text("0\n")
    (disk / "queue" / "scheduler").write_text("[none] mq-deadline\n")
    (disk / "queue" / "read_ahead_kb").write_text("128\n")
    (disk / "device").mkdir()
    (disk / "device" / "model").write_text("Samsung SSD 980 PRO 1TB  \n")
    (sys_root / "dev" / "block").mkdir(parents=True)
    (sys_root / "dev" / "block" / "259:2").symlink_to(part)
    (sys_root / "class" / "block").mkdir(parents=True)
    (sys_root / "class" / "block" / "nvme0n1p2").symlink_to(part)
    (sys_root / "class" / "block" / "nvme0n1").symlink_to(disk)
    (sys_root / "block").mkdir()
    (sys_root / "block" / "nvme0n1").symlink_to(disk)
    loop = sys_root / "devices" / "virtual" / "loop3"
    (loop / "loop").mkdir(parents=True)
    (loop / "queue").mkdir()
    (loop / "queue" / "rotational").write_text("1\n")
    backing = tmp_path / "backing.img"
    backing.write_bytes(b"\0" * 16)
    (loop / "loop" / "backing_file").write_text(f"{backing}\n")
    (sys_root / "dev" / "block" / "7:3").symlink_to(loop)
    (sys_root / "class" / "block" / "loop3").symlink_to(loop)
    (sys_root / "block" / "loop3").symlink_to(loop)
    return sys_root


def test_partition_resolves_to_its_disk(tmp_path: Path):
    info = block_device("259:2", _fake_sys(tmp_path))
    assert info["disk"] == "nvme0n1" and info["partition"] == "nvme0n1p2"
    assert info["rotational"] is False and info["scheduler"] == "none"
    assert info["read_ahead_kb"] == 128 and info["model"] == "Samsung SSD 980 PRO 1TB"


def test_the_write_cache_and_driver_are_recorded_when_sysfs_has_them(tmp_path: Path):
    sys_root = _fake_sys(tmp_path)
    assert "write_cache" not in block_device("259:2", sys_root)  # an older kernel: unknown
    disk = sys_root / "devices" / "pci" / "nvme0n1"
    (disk / "queue" / "write_cache").write_text("write back\n")
    driver = sys_root / "bus" / "pci" / "drivers" / "nvme"
    driver.mkdir(parents=True)
    (disk / "device" / "driver").symlink_to(driver)
    info = block_device("259:2", sys_root)
    assert info["write_cache"] == "write back" and info["driver"] == "nvme"


def test_loop_device_resolves_to_backing_file_device(tmp_path: Path):
    info = block_device("7:3", _fake_sys(tmp_path))
    assert info["loop_backing_file"] == str(tmp_path / "backing.img")
    st = os.stat(tmp_path / "backing.img")
    backing = info["backing_device"]
    assert isinstance(backing, dict)
    assert backing["devnum"] == f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


def test_unknown_device_number_is_virtual(tmp_path: Path):
    info = block_device("0:27", _fake_sys(tmp_path))
    assert info["name"] is None and "virtual" in str(info["note"])


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)", "15.18"),
        ("pgbench (PostgreSQL) 17.2", "17.2"),
        ("postgres (PostgreSQL) 10.23", "10.23"),
        ("psql (PostgreSQL) 18beta1", "18"),
        ("something else", None),
    ],
)
def test_parse_version(text: str, version: str | None):
    assert parse_version(text) == version


def test_conf_line_quotes_values_safely():
    assert conf_line("work_mem", "8MB") == "work_mem = '8MB'\n"
    assert conf_line("x", "it's") == "x = 'it''s'\n"
    assert conf_line("x", "a\\b") == "x = 'a\\\\b'\n"


def test_directory_claims(tmp_path: Path):
    with pytest.raises(UsageError, match="does not exist"):
        check_directory(tmp_path / "missing", "target directory")
    empty = tmp_path / "empty"
    empty.mkdir()
    check_directory(empty, "target directory")
    (empty / "lost+found").mkdir()  # a fresh filesystem's root is fine
    check_directory(empty, "target directory")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.db").write_text("x")
    with pytest.raises(UsageError, match=r"not empty \(data.db\)"):
        check_directory(foreign, "target directory")
    claim = claim_directory(empty)
    assert (empty / MARKER).exists() and claim.created_marker
    (empty / "howfast-abc").mkdir()
    check_directory(empty, "target directory")  # ours now: non-empty is fine
    claim.release()
    assert (empty / MARKER).exists(), "the marker stays while our cluster is there"
    (empty / "howfast-abc").rmdir()
    claim.release()
    assert not (empty / MARKER).exists()


def test_parse_dsn_keeps_password_out_of_args():
    conn = parse_dsn("postgresql://bench:pw%40x@db.example:6432/bench?sslmode=require")
    assert (conn.host, conn.port, conn.user, conn.dbname) == ("db.example", 6432, "bench", "bench")
    assert conn.password == "pw@x"
    assert "pw@x" not in " ".join(conn.pgbench_args()) and "pw@x" not in repr(conn)
    assert conn.client_env() == {"PGSSLMODE": "require", "PGPASSWORD": "pw@x"}
    with pytest.raises(UsageError):
        parse_dsn("postgresql://bench@db/x?nonsense_option=1")


def refused_while_working_in(
    data: Path, directory: Path
) -> tuple[pytest.ExceptionInfo[UsageError], int]:
    """check_earlier_clusters(directory) while a process works in `data`: its refusal."""
    sleeper = subprocess.Popen(["sleep", "30"], cwd=data)
    try:
        with pytest.raises(UsageError) as caught:
            check_earlier_clusters(directory, "target directory")
    finally:
        sleeper.kill()
        sleeper.wait()
    return caught, sleeper.pid


def test_earlier_clusters_stopped_are_noted_and_running_are_refused(tmp_path: Path):
    (tmp_path / MARKER).write_text("{}\n")
    assert check_earlier_clusters(tmp_path, "target directory") == []
    (tmp_path / "howfast-kept1").mkdir()
    (tmp_path / "howfast-note.txt").write_text("not a cluster directory")
    notes = check_earlier_clusters(tmp_path, "target directory")
    assert len(notes) == 1 and "holds howfast-kept1 from an earlier run" in notes[0]
    running = tmp_path / "howfast-live2" / "data"
    running.mkdir(parents=True)
    # A process working in the cluster's data directory, as every PostgreSQL process does.
    caught, pid = refused_while_working_in(running, tmp_path)
    assert f"its server is still running (PIDs {pid})" in str(caught.value)
    assert f"pg_ctl -D {running} stop -m fast" in (caught.value.hint or "")
    assert f"`howfast cleanup --target {tmp_path}` lists" in (caught.value.hint or "")
    assert check_earlier_clusters(tmp_path, "target directory")[1].count("howfast-live2") == 1


def test_libpq_keywords_reach_the_tools_under_the_variables_libpq_reads():
    """application_name is PGAPPNAME, not PGAPPLICATION_NAME: a variable libpq never reads
    would leave pgbench's sessions without the option the user gave."""
    conn = parse_dsn(
        "postgresql://bench@db.example/bench?application_name=bench&client_encoding=UTF8"
        "&sslrootcert=/ca.pem&ssl_min_protocol_version=TLSv1.3&keepalives=1"
    )
    assert conn.options_env() == {
        "PGAPPNAME": "bench",
        "PGCLIENTENCODING": "UTF8",
        "PGSSLROOTCERT": "/ca.pem",
        "PGSSLMINPROTOCOLVERSION": "TLSv1.3",
    }


def test_earlier_leftovers_say_how_to_remove_them(tmp_path: Path):
    """What a killed run left says `howfast cleanup`; a --keep cluster says it was kept. A
    server still running on a killed run's emulated volume is named by its real data
    directory, inside the volume (the volume's workspace has no data directory)."""
    (tmp_path / MARKER).write_text("{}\n")
    (tmp_path / "howfast-0c44b091" / "data").mkdir(parents=True)
    (tmp_path / "howfast-1234abcd").mkdir()
    (tmp_path / "howfast-1234abcd" / KEPT).write_text("kept\n")
    volume = tmp_path / "howfast-vol-071aee8f"
    (volume / "mnt").mkdir(parents=True)
    notes = check_earlier_clusters(tmp_path, "target directory")
    cleanup = f"`howfast cleanup --target {tmp_path} --yes` removes it"
    killed = "howfast-0c44b091 from an earlier run, left by a howfast that was killed"
    assert notes[0].endswith(f"{killed}: {cleanup}")
    assert "howfast-1234abcd from an earlier run, kept with --keep" in notes[1]
    assert "an emulated volume left by a howfast that was killed" in notes[2]
    assert notes[2].endswith(cleanup)
    data = volume / "mnt" / "howfast-9abcdef0" / "data"
    data.mkdir(parents=True)
    caught, _ = refused_while_working_in(data, tmp_path)
    assert f"holds {volume.name} from an earlier run whose howfast is gone" in str(caught.value)
    assert f"pg_ctl -D {data} stop -m fast" in (caught.value.hint or "")


def test_a_connection_with_alternates_asks_libpq_for_the_writable_one_among_them_all():
    from howfast.targets.base import Connection, conninfo_value

    conn = Connection(host="/run/a", port=5433, user="howfast", dbname="postgres",
                      password="s3cret", alternates=(("/run/my dir", 5434),))  # fmt: skip
    assert conn.pgbench_args() == [
        "-U", "howfast",
        "host='/run/a,/run/my dir' port=5433,5434 target_session_attrs=read-write dbname=postgres",
    ]  # fmt: skip
    assert "s3cret" not in " ".join(conn.pgbench_args())  # the password stays in the env
    kwargs = conn.psycopg_kwargs()
    assert kwargs["host"] == "/run/a,/run/my dir" and kwargs["port"] == "5433,5434"
    assert kwargs["target_session_attrs"] == "read-write" and kwargs["password"] == "s3cret"
    plain = Connection(host="/run/a", port=5433, user="howfast", dbname="postgres")
    assert plain.pgbench_args() == ["-h", "/run/a", "-p", "5433", "-U", "howfast", "postgres"]
    assert "target_session_attrs" not in plain.psycopg_kwargs()
    assert conninfo_value("it's") == "'it\\'s'" and conninfo_value("") == "''"
    assert conninfo_value("a\\b") == "'a\\\\b'"
