"""The standby pod's start script (targets/k8s/standby_manifests.py STANDBY_SCRIPT) run for
real, outside Kubernetes: the same text, with the paths the pod's environment gives it pointed
at directories here, against a real local primary over TCP with a password. It checks what
only PostgreSQL can: pg_basebackup's arguments, the password file libpq reads (with a password
that needs escaping), the standby settings that make it stream from its slot, and the stop.
What it cannot check here (the pod, its volumes, the DNS name, the Secret) is the lab's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s import standby_manifests as sm
from tests.conftest import PgServer, free_port, pg_os_user, running_cluster, shared_tmpdir

PASSWORD = "s:e\\cr'et"  # ':' and '\' must be escaped in a pgpass file


@dataclass
class Standby:
    proc: subprocess.Popen[bytes]
    base: Path
    data: Path
    run: Path
    port: int
    stderr: Path

    def server_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        return None


@pytest.fixture
def primary() -> Iterator[PgServer]:
    if pg_os_user() is None:
        pytest.skip("needs root, to run PostgreSQL as an unprivileged user")
    with running_cluster() as server:
        quoted = PASSWORD.replace("'", "''")
        server.psql(f"CREATE ROLE {m.SUPERUSER} LOGIN REPLICATION PASSWORD '{quoted}'")
        yield server


@contextlib.contextmanager
def standby(primary: PgServer, password: str) -> Iterator[Standby]:
    user = pg_os_user()
    assert user is not None
    base = shared_tmpdir("howfast-test-standby-")
    run, config = base / "run", base / "config"
    for d in (run, config):
        d.mkdir()
    for d in (base, run):
        os.chown(d, user.pw_uid, user.pw_gid)
    port = free_port()
    address = net.ServerAddress("127.0.0.1", primary.port)
    passfile = str(run / "pgpass")
    block = sm.standby_settings(
        "standby_1", address, port=port, listen="127.0.0.1", socket_dir=str(run), passfile=passfile
    )
    (config / "standby.conf").write_text(m.conf_text(block))
    env = {
        "PATH": "/usr/bin:/bin",
        "PGDATA": str(base / "standby"),
        "HOWFAST_RUN": str(run),
        "HOWFAST_CONFIG": str(config),
        "HOWFAST_PRIMARY": sm.primary_conninfo(address, "standby_1", passfile),
        "HOWFAST_SLOT": "standby_1",
        "HOWFAST_USER": m.SUPERUSER,
        "HOWFAST_PASSWORD": password,
    }
    stderr = base / "stderr"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", sm.STANDBY_SCRIPT], env=env, cwd=base, stdout=err, stderr=err,
            start_new_session=True, user=user.pw_uid, group=user.pw_gid,
        )  # fmt: skip
    node = Standby(proc, base, base / "standby", run, port, stderr)
    try:
        yield node
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)  # its trap stops the server (pg_ctl stop -m fast)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
        server = node.server_pid()
        if server is not None:  # the script could not stop it: by the PID it wrote
            with contextlib.suppress(ProcessLookupError):
                os.kill(server, signal.SIGQUIT)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        subprocess.run(["rm", "-rf", str(base)], check=False)


def _gone(pid: int, timeout_s: float) -> bool:
    """The process has ended (a zombie not yet reaped by its new parent counts as ended)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def _replication_state(primary: PgServer) -> str:
    return primary.psql(
        "SELECT state FROM pg_stat_replication WHERE application_name = 'standby_1'"
    )


def _standby_sql(primary: PgServer, node: Standby, sql: str) -> str:
    out = subprocess.run(
        [str(primary.bindir / "psql"), "-X", "-A", "-t", "-h", str(node.run), "-p", str(node.port),
         "-U", primary.user, "-d", "postgres", "-c", sql],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return out.stdout.strip() if out.returncode == 0 else f"error: {out.stderr.strip()}"


def test_the_standby_script_makes_a_streaming_standby_and_stops_it(primary: PgServer) -> None:
    with standby(primary, PASSWORD) as node:
        deadline = time.monotonic() + 90
        while _replication_state(primary) != "streaming":
            assert node.proc.poll() is None, node.stderr.read_text()
            assert time.monotonic() < deadline, "the standby never streamed"
            time.sleep(0.3)
        slot = primary.psql("SELECT slot_name, active FROM pg_replication_slots")
        assert slot == "standby_1|t"
        primary.psql("CREATE TABLE replicated AS SELECT 42 AS answer")
        while _standby_sql(primary, node, "SELECT answer FROM replicated") != "42":
            assert time.monotonic() < deadline, "the row never reached the standby"
            time.sleep(0.3)
        assert _standby_sql(primary, node, "SELECT pg_is_in_recovery()") == "t"
        # libpq's password file: private, the password escaped, read (the standby connected)
        pgpass = node.run / "pgpass"
        assert stat.S_IMODE(pgpass.stat().st_mode) == 0o600
        assert pgpass.read_text() == "*:*:*:howfast:s\\:e\\\\cr'et\n"
        auto = (node.data / "postgresql.auto.conf").read_text()
        assert "primary_conninfo = 'host=127.0.0.1" in auto and "passfile=" in auto
        assert "cr'et" not in auto and "cr''et" not in auto  # never the password itself
        assert (node.data / "standby.signal").exists()
        server = node.server_pid()
        assert server is not None
        os.kill(node.proc.pid, signal.SIGTERM)
        assert node.proc.wait(timeout=60) == 0
        assert not (node.data / "postmaster.pid").exists()
        assert _gone(server, timeout_s=10)


def test_a_standby_that_cannot_connect_exits_with_pg_basebackups_words(
    primary: PgServer,
) -> None:
    with standby(primary, "wrong password") as node:
        assert node.proc.wait(timeout=60) == 1
        said = node.stderr.read_text()
        assert "password authentication failed" in said and "howfast" in said
        assert not (node.data / "PG_VERSION").exists()
        assert primary.psql("SELECT count(*) FROM pg_replication_slots") == "0"
