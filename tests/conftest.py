"""Shared fixtures. `pg_server` is a real PostgreSQL cluster made with initdb/pg_ctl, written
here independently of howfast's own local target so that tests do not lean on the code they test.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import pwd
import random
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from howfast.targets.leftovers import registry

# The test modules pytest rewrites (for its assertion messages) are cached in __pycache__, even
# where PYTHONDONTWRITEBYTECODE is set (as on this project's CI machines): without it every
# pytest process rewrote every module it collected again, ~14 s of CPU for all of tests/ on 2
# cores; read from the cache, 11 s instead of 25 s. scripts/setup.sh compiles the clone's
# other bytecode ahead for the same reason. This process only: the commands the tests start
# keep the environment's setting.
sys.dont_write_bytecode = False

PASSWORD = "s3cret-pw"  # test-only; tests assert it never reaches the store or output


def pg_bindir() -> Path | None:
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    for d in reversed(candidates):
        if (d / "initdb").exists():
            return d
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


# Test ports come from below the kernel's ephemeral range: a port the kernel handed out
# (bind to 0) is free only until the next outgoing connection is given it as its local port,
# and a port chosen long before it is bound (Prometheus scraping howfast's future
# --metrics-port) was taken that way on a busy CI machine. Ports below the range are never
# handed out by the kernel. 20000-29999: above well-known services' ports, below Kubernetes'
# NodePort range (30000-32767; the lab keeps NodePorts off loopback, but not every cluster).
TEST_PORTS = range(20000, 30000)
PORT_TRIES = 100


def ephemeral_ports() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port free on `address` now, outside the ephemeral range where there is room."""
    low, _ = ephemeral_ports()
    ports = range(TEST_PORTS.start, min(TEST_PORTS.stop, low))
    if len(ports) >= 1000:
        for port in random.sample(ports, PORT_TRIES):
            with socket.socket() as s:
                try:
                    s.bind((address, port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:  # a range reaching down to them: the kernel's choice
        s.bind((address, 0))
        return int(s.getsockname()[1])


def shared_tmpdir(prefix: str) -> Path:
    """A temp dir an unprivileged PostgreSQL user can reach (pytest's tmp_path is 0700 root)."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    d.chmod(0o755)
    return d


def pg_os_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "howfast"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "howfast"],
        check=True,
    )
    return pwd.getpwnam("howfast")


@dataclass
class PgServer:
    bindir: Path
    port: int
    socket_dir: Path
    data: Path
    user: str = "bench"
    password: str = PASSWORD

    @property
    def dsn(self) -> str:
        """URI with the password: what a user would pass to --target."""
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/postgres"

    @property
    def dsn_nopass(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def psql(self, sql: str) -> str:
        out = subprocess.run(
            [
                str(self.bindir / "psql"),
                "-X",
                "-A",
                "-t",
                "-h",
                str(self.socket_dir),
                "-p",
                str(self.port),
                "-U",
                self.user,
                "-d",
                "postgres",
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip()


@contextlib.contextmanager
def running_cluster(extra_options: str = "") -> Iterator[PgServer]:
    """A real PostgreSQL cluster on a loopback port with a password for `bench`, started with
    pg_ctl (extra server options appended: `-c name=value ...`) and removed afterwards."""
    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    base = shared_tmpdir("howfast-test-pg-")
    data, sock = base / "data", base / "sock"
    user = pg_os_user()
    run_as: dict[str, int] = {}
    sock.mkdir()
    pwfile = base / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if user is not None:
        for p in (base, sock, pwfile):
            os.chown(p, user.pw_uid, user.pw_gid)
        run_as = {"user": user.pw_uid, "group": user.pw_gid}
    subprocess.run(
        [
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "bench",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        **run_as,  # type: ignore[call-overload]
    )
    port = free_port()
    opts = (
        f"-c listen_addresses=127.0.0.1 -c port={port} "
        f"-c unix_socket_directories={sock} -c fsync=off {extra_options}"
    ).strip()
    try:
        subprocess.run(
            [
                str(bindir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(base / "log"),
                "-o",
                opts,
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
            **run_as,  # type: ignore[call-overload]
        )
        yield PgServer(bindir=bindir, port=port, socket_dir=sock, data=data)
    finally:
        subprocess.run(
            [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            **run_as,  # type: ignore[call-overload]
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    with running_cluster() as server:
        yield server


# The test files that take longest, with the seconds they took in the main session of
# `make test` (`-m "not k8s and not emulated"`, 3 workers, --durations=0, summed per file)
# on this 2-core machine, measured 2026-11-29 beside other work (load 9-16: the session took
# 25 min, so every figure is about 1.5 times a quiet run's; the order is what counts).
# pytest-xdist's `--dist loadfile` hands files to its workers in collection order: a long
# file collected late (test_replicas.py sorts near the end) ran alone for minutes after the
# others had finished. Collected first, the long files run side by side and the short ones
# fill in around them. Order only: a file missing from this list runs after these, in its
# usual place.
LONGEST_FILES = {
    "tests/integration/test_inputs.py": 480,
    "tests/integration/test_replicas.py": 409,
    "tests/integration/test_faults.py": 369,
    "tests/integration/test_failover.py": 239,
    "tests/integration/test_events.py": 176,
    "tests/integration/test_run_local.py": 174,
    "tests/integration/test_partition.py": 169,
    "tests/integration/test_until.py": 161,
    "tests/integration/test_durability.py": 156,
    "tests/integration/test_fleet.py": 140,
    "tests/integration/test_run_dsn.py": 112,
    "tests/integration/test_dry_run.py": 108,
    "tests/integration/test_travel_and_gate.py": 106,
    "tests/integration/test_regimes.py": 104,
    "tests/integration/test_why.py": 86,
    "tests/integration/test_cleanup_killed.py": 66,
    "tests/integration/test_trials_read.py": 60,
    "tests/integration/test_report_full_disk.py": 59,
    "tests/integration/test_samplers.py": 53,
    "tests/integration/test_load_room.py": 52,
    "tests/integration/test_install.py": 49,
    "tests/integration/test_cli.py": 47,
    "tests/integration/test_invariants.py": 47,
    "tests/integration/test_trials.py": 45,
    # tests/unit's longest (quiet, seconds of wall time): first, so that `make unit` does
    # not end on one of them
    "tests/unit/test_exec_event.py": 9,
    "tests/unit/test_stored_figures.py": 8,
    "tests/unit/test_pgbench_pastes.py": 7,
    "tests/unit/test_pod_shells.py": 6,
    "tests/unit/test_layers.py": 5,
    "tests/unit/test_fio.py": 5,
    "tests/unit/test_function_size.py": 4,
    "tests/unit/test_report_browser.py": 4,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def seconds(item: pytest.Item) -> int:
        return LONGEST_FILES.get(item.nodeid.split("::", 1)[0], 0)

    # scripts/test.sh runs the emulated-volume tests from tests/integration alone; one
    # elsewhere would run in no session of `make test` (the main one leaves them out).
    stray = [
        item.nodeid
        for item in items
        if item.get_closest_marker("emulated") and not item.nodeid.startswith("tests/integration/")
    ]
    if stray:
        raise pytest.UsageError(
            f"tests marked emulated must live in tests/integration (scripts/test.sh): {stray}"
        )

    items.sort(key=seconds, reverse=True)  # stable: each file's tests keep their order


CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_dirs(pattern: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """The cgroups under `root`, at any depth, whose name matches the glob `pattern`. A walk
    that skips directories removed while it goes (os.walk ignores their errors): the lab's
    kubelet makes and removes pod cgroups all the time, and a recursive Path.glob then failed
    with FileNotFoundError (seen in a full run beside the lab tests)."""
    return [
        Path(parent, name)
        for parent, dirs, _ in os.walk(root)
        for name in dirs
        if fnmatch.fnmatchcase(name, pattern)
    ]


@pytest.fixture
def fresh_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This process's ownership registry (targets/leftovers/registry.py), new and in the
    test's own state directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setattr(registry, "_registry", registry._Registry())
    yield tmp_path / "state"
