"""Records pg_stat_activity rows under pgbench for the wait-event sampler's tests. Run as root
from the repository root:

    .venv/bin/python tests/data/pgstats/record_activity.py DIR

DIR: an empty directory. Writes tests/data/pgstats/activity-pg15-recorded.json: a list of
readings, each the rows of pg_stat_activity (row_to_json, every backend type) at one moment,
taken 0.1 s apart while tpcb-like runs at scale 1 with 8 clients (lock waits), 0.4 s after an
idle session of another database connected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from howfast.machine.pgbin import choose_install
from howfast.targets import pgquery
from howfast.targets.local import LocalTarget

HERE = Path(__file__).parent


def main(directory: Path) -> None:
    install = choose_install()
    target = LocalTarget(directory, install, settings={"shared_buffers": "32MB"})
    target.check(will_init=True)
    conn = target.start()
    try:
        env = {**os.environ, **conn.client_env()}
        pgbench = str(install.program("pgbench"))
        args = conn.pgbench_args()
        subprocess.run([pgbench, "-i", "-q", "-s", "1", *args], env=env, check=True)
        with pgquery.connect(conn) as db:
            db.autocommit = True
            db.execute("CREATE DATABASE other")
        bench = subprocess.Popen([pgbench, "-c", "8", "-j", "2", "-T", "5", *args], env=env)
        other = subprocess.Popen(
            [str(install.program("psql")), "-h", conn.host, "-p", str(conn.port), "-U",
             conn.user, "-d", "other", "-c", "SELECT pg_sleep(3)"],
            env=env,
        )  # fmt: skip
        time.sleep(1.5)
        readings = []
        with pgquery.connect(conn) as db:
            db.autocommit = True
            db.execute("SET application_name = 'howfast-waits'")
            for _ in range(12):
                row = db.execute("SELECT json_agg(a) FROM pg_stat_activity a").fetchone()
                readings.append(row[0] if row else [])
                time.sleep(0.1)
        bench.wait()
        other.wait()
        (HERE / "activity-pg15-recorded.json").write_text(json.dumps(readings, indent=1) + "\n")
    finally:
        target.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
