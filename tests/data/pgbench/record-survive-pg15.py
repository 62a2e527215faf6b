#!/usr/bin/env python3
"""Re-record the surviving load's outputs of this directory (README.md, "Segments"), with the
installed PostgreSQL and a throwaway server (tests/pgprocess.py: the postgres OS user, a Unix
socket, fsync on), stopped and removed at the end. As root, from the repository:

    .venv/bin/python tests/data/pgbench/record-survive-pg15.py OUTPUT_DIR

1. Single pgbench runs cut by the server (stdout and stderr apart, as the host gives them):
   `segment-NAME-pg15.out`, `.err`, their exit statuses in `segments-pg15.json`.
2. `show-script-MODE-pg15.txt`: `pgbench --show-script=MODE`.
3. `survive-pg15/`: howfast's supervisor (survive.supervise) for 14 s in 4 s segments,
   tpcb-like at 2 clients, the log sampled at 0.1, a restart at 4.5 s and a crash at 9.5 s:
   each segment's `seg-N/out`, `seg-N/err`, `seg-N/txlog/tx.*`, and `load.json` (the
   segments' times and statuses, when each event was applied and when the server answered
   again, and the pgbench_history rows counted after the load, in all and by the hundredth
   of a second of their mtime).
4. `survive-script-pg15/`: the shell supervisor (survive.script_invocation) for 6 s in 2 s
   segments, a restart at 2.5 s: its stderr stream (`stderr.txt`) and collected files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository, for tests/

from tests.pgprocess import Postmaster

from howfast.hosts.base import Invocation, ToolResult
from howfast.hosts.local import LocalHost
from howfast.targets.base import Connection
from howfast.workloads.pgbench import history, survive

SAMPLING = 0.1


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    server = Postmaster(port=5433)
    try:
        server.start()
        pgbench = str(server.bin / "pgbench")
        subprocess.run([pgbench, "-i", "-q", "-s", "2", *server.conninfo_args()],
                       check=True, capture_output=True)  # fmt: skip
        record_single_runs(server, pgbench, out)
        for mode in ("tpcb-like", "simple-update", "select-only"):
            shown = subprocess.run([pgbench, f"--show-script={mode}"], capture_output=True,
                                   text=True, check=True)  # fmt: skip
            (out / f"show-script-{mode}-pg15.txt").write_text(shown.stdout + shown.stderr)
        record_supervised(server, pgbench, out / "survive-pg15")
        record_script(server, pgbench, out / "survive-script-pg15")
    finally:
        server.close()
    return 0


def run_cut(argv: list[str], work: Path, cut: Callable[[], object] | None, at_s: float):
    """pgbench, with `cut` applied `at_s` seconds after it started."""
    work.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(argv, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    timer = threading.Timer(at_s, cut) if cut else None
    if timer:
        timer.start()
    stdout, stderr = proc.communicate(timeout=120)
    if timer:
        timer.join()
    return proc.returncode, stdout, stderr


def record_single_runs(server: Postmaster, pgbench: str, out: Path) -> None:
    conn = server.conninfo_args()
    statuses = {}
    work = out / "work"
    runs: list[tuple[str, list[str], Callable[[], object] | None]] = [
        ("restart", ["-c", "4", "-j", "1"], server.restart),
        ("restart-j2", ["-c", "2", "-j", "2"], server.restart),
        ("crash", ["-c", "2", "-j", "2"], server.crash),
    ]
    for name, options, cut in runs:
        argv = [pgbench, "-n", "-T", "6", *options, *conn]
        rc, stdout, stderr = run_cut(argv, work, cut, 2.0)
        save(out, name, rc, stdout, stderr, argv, statuses)
    # no server at all: its socket is not there
    argv = [pgbench, "-n", "-T", "2", "-c", "2", "-h", str(server.base / "none"), "-p", "5433",
            "-U", "howfast", "postgres"]  # fmt: skip
    rc, stdout, stderr = run_cut(argv, work, None, 0)
    save(out, "refused", rc, stdout, stderr, argv, statuses)
    # a server in crash recovery: tried right after a crash, until it says so
    for _ in range(20):
        assert server.proc is not None
        server.proc.kill()
        server.proc.wait()
        time.sleep(2)  # its children notice and exit
        starter = threading.Thread(target=server.start)
        starter.start()
        time.sleep(0.02)
        argv = [pgbench, "-n", "-T", "2", "-c", "2", *conn]
        rc, stdout, stderr = run_cut(argv, work, None, 0)
        starter.join()
        if "not yet accepting connections" in stderr or "starting up" in stderr:
            save(out, "recovering", rc, stdout, stderr, argv, statuses)
            break
    shutil.rmtree(work)
    (out / "segments-pg15.json").write_text(json.dumps(statuses, indent=2) + "\n")


def save(out: Path, name: str, rc: int, stdout: str, stderr: str, argv: list[str],
         statuses: dict[str, object]) -> None:  # fmt: skip
    (out / f"segment-{name}-pg15.out").write_text(stdout)
    (out / f"segment-{name}-pg15.err").write_text(stderr)
    statuses[name] = {"returncode": rc, "argv": [Path(argv[0]).name, *argv[1:]]}
    print(f"{name}: status {rc}", flush=True)


def connection(server: Postmaster) -> Connection:
    return Connection(host=str(server.socket_dir), port=server.port, user="howfast",
                      dbname="postgres")  # fmt: skip


def record_supervised(server: Postmaster, pgbench: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    conn = connection(server)
    history.reset(conn)
    host = LocalHost()
    base = survive.base_argv(
        pgbench, {"mode": "tpcb-like", "clients": 2, "log_sampling_rate": SAMPLING},
        jobs=2, conn_args=conn.pgbench_args(), progress=False,
    )  # fmt: skip
    events: list[dict[str, object]] = []
    origin: list[float] = []

    def apply(name: str, action: Callable[[], float], at_s: float) -> None:
        while not origin:
            time.sleep(0.01)
        time.sleep(max(0.0, origin[0] + at_s - time.time()))
        applied = time.time()
        took = action()
        events.append({"action": name, "at_s": at_s, "applied_s": applied - origin[0],
                       "back_s": applied + took - origin[0]})  # fmt: skip

    def run(invocation: Invocation, subdir: str, on_line: Callable[[str], None]) -> ToolResult:
        if not origin:
            origin.append(time.time())
        return host.run(invocation, out / subdir, on_line=on_line)

    threads = [threading.Thread(target=apply, args=("restart", server.restart, 4.5)),
               threading.Thread(target=apply, args=("crash", server.crash, 9.5))]  # fmt: skip
    for t in threads:
        t.start()
    done = survive.supervise(
        base, conn, duration_s=14, run=run, how=survive.Supervision(segment_s=4)
    )
    for t in threads:
        t.join()
    for segment in done.segments:
        (out / f"seg-{segment.number}" / "out").write_text(segment.stdout)
        (out / f"seg-{segment.number}" / "err").write_text(segment.stderr)
    (rows,) = history.count_rows(conn, [(None, None)], done.started_epoch)
    by_10ms = server.psql(
        "SELECT floor(extract(epoch FROM mtime AT TIME ZONE current_setting('TimeZone')) * 100)"
        "::bigint, count(*) FROM pgbench_history GROUP BY 1 ORDER BY 1"
    )
    load = {
        "argv": [Path(base[0]).name, *base[1:]],
        "sampling": SAMPLING,
        "started_epoch": done.started_epoch,
        "ended_epoch": done.ended_epoch,
        "segments": [
            {
                "number": s.number,
                "seconds": s.seconds,
                "started_epoch": s.started_epoch,
                "ended_epoch": s.ended_epoch,
                "returncode": s.returncode,
            }
            for s in done.segments
        ],
        "events": events,
        "history_rows": rows.rows,
        # the rows by the hundredth of a second of their mtime (the transaction's start)
        "history_rows_by_10ms": {
            k: int(v) for k, v in (line.split("|") for line in by_10ms.splitlines())
        },
    }
    (out / "load.json").write_text(json.dumps(load, indent=2) + "\n")
    print(f"supervised: {len(done.segments)} segments, {rows.rows} history rows", flush=True)


def record_script(server: Postmaster, pgbench: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    conn = connection(server)
    history.reset(conn)
    base = survive.base_argv(
        pgbench, {"mode": "tpcb-like", "clients": 2, "log_sampling_rate": SAMPLING},
        jobs=2, conn_args=conn.pgbench_args(), progress=True,
    )  # fmt: skip
    invocation = survive.script_invocation(base, conn, duration_s=6, segment_s=2)
    timer = threading.Timer(2.5, server.restart)
    timer.start()
    result = LocalHost().run(invocation, out)
    timer.join()
    (out / "stderr.txt").write_text(result.stderr)
    (rows,) = history.count_rows(conn, [(None, None)], 0.0)
    (out / "load.json").write_text(json.dumps({"returncode": result.returncode,
                                               "history_rows": rows.rows}) + "\n")  # fmt: skip
    print(f"script: status {result.returncode}, {rows.rows} history rows", flush=True)


if __name__ == "__main__":
    sys.exit(main())
