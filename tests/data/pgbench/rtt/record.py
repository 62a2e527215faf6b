"""Re-record the round-trip probe's outputs of this directory (see README.md): the probe as
howfast builds it (workloads/pgbench/rtt.py), run against a throwaway PostgreSQL started here
as the `postgres` OS user and stopped by its PID, once over the Unix socket and once over TCP
127.0.0.1 (with a password). Usage, as root, from the repository:

    .venv/bin/python tests/data/pgbench/rtt/record.py
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from howfast.targets.base import Connection
from howfast.workloads.pgbench.rtt import rtt_invocation

HERE = Path(__file__).resolve().parent
BIN = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
PASSWORD = "rtt-recording-only"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    pg = pwd.getpwnam("postgres")
    as_pg = {"user": pg.pw_uid, "group": pg.pw_gid}
    base = Path(tempfile.mkdtemp(prefix="howfast-rtt-", dir="/var/tmp"))
    base.chmod(0o755)
    os.chown(base, pg.pw_uid, pg.pw_gid)
    (base / "pw").write_text(PASSWORD + "\n")
    os.chown(base / "pw", pg.pw_uid, pg.pw_gid)
    subprocess.run(
        [str(BIN / "initdb"), "-D", str(base / "data"), "-U", "postgres", "--auth-local=trust",
         "--auth-host=scram-sha-256", f"--pwfile={base / 'pw'}", "--no-sync"],
        check=True, capture_output=True, **as_pg,  # type: ignore[call-overload]
    )  # fmt: skip
    port = free_port()
    log = (base / "log").open("w")
    server = subprocess.Popen(
        [str(BIN / "postgres"), "-D", str(base / "data"), "-c", f"port={port}",
         "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={base}",
         "-c", "fsync=off"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **as_pg,  # type: ignore[call-overload]
    )  # fmt: skip
    try:
        for _ in range(100):
            ready = subprocess.run(
                [str(BIN / "pg_isready"), "-q", "-h", str(base), "-p", str(port)], check=False
            )
            if ready.returncode == 0:
                break
            time.sleep(0.1)
        places = {
            "socket": Connection(str(base), port, "postgres", "postgres"),
            "tcp": Connection("127.0.0.1", port, "postgres", "postgres", password=PASSWORD),
        }
        for name, conn in places.items():
            invocation = rtt_invocation(BIN / "pgbench", conn)
            work = base / f"work-{name}"
            work.mkdir()
            for d in invocation.dirs:
                (work / d).mkdir()
            for file, text in invocation.inputs.items():
                (work / file).write_text(text)
            shutil.chown(work, pg.pw_name)
            for d in invocation.dirs:
                shutil.chown(work / d, pg.pw_name)
            env = {"PATH": "/usr/bin:/bin", **invocation.env, **invocation.secret_env}
            out = subprocess.run(
                list(invocation.argv), cwd=work, env=env, capture_output=True, text=True,
                check=True, **as_pg,  # type: ignore[call-overload]
            )  # fmt: skip
            dest = HERE / name
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir()
            # the argv as run, with this machine's paths and port replaced by stable words
            argv = " ".join(invocation.argv).replace(str(base), "SOCKDIR")
            argv = argv.replace(str(BIN), "BIN").replace(str(port), "PORT")
            (dest / "argv.txt").write_text(argv + "\n")
            (dest / "stdout.txt").write_text(out.stdout)
            for log_file in sorted(work.glob("rtt/tx*")):
                shutil.copy(log_file, dest / log_file.name)
    finally:
        os.kill(server.pid, signal.SIGINT)  # fast shutdown, by the PID started here
        server.wait(timeout=60)
        log.close()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
