"""Records the /proc snapshots, PostgreSQL statistics rows and checkpoint log lines the
sampler tests read, from a real cluster under load. Run as root from the repository root:

    .venv/bin/python tests/data/proc/record.py DATA_DIR WAL_DIR

DATA_DIR and WAL_DIR: empty directories, ideally on two loop devices. Writes into
tests/data/proc/, tests/data/pgstats/ and tests/data/checkpoints/ (files named *-recorded*).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from howfast.machine.pgbin import choose_install
from howfast.samplers.pgstats import build_query, choose_views
from howfast.targets import pgquery
from howfast.targets.local import LocalOptions, LocalTarget

HERE = Path(__file__).parent


def main(data: Path, wal: Path) -> None:
    install = choose_install()
    target = LocalTarget(
        data,
        install,
        options=LocalOptions(wal_dir=wal),
        settings={"shared_buffers": "64MB", "max_wal_size": "48MB", "wal_init_zero": "off"},
    )
    target.check(will_init=True)
    conn = target.start()
    try:
        env = {**os.environ, **conn.client_env()}
        pgbench = str(install.program("pgbench"))
        subprocess.run([pgbench, "-i", "-q", "-s", "5", *conn.pgbench_args()], env=env, check=True)
        with pgquery.connect(conn) as db:
            row = db.execute("SELECT current_setting('server_version_num')::int").fetchone()
            assert row is not None
            version = int(str(row[0]))
            query = build_query(choose_views(version)[0])
            major = version // 10000
            argv = [pgbench, "-b", "tpcb-like", "-c", "4", "-j", "2", "-T", "12"]
            load = subprocess.Popen(
                [*argv, *conn.pgbench_args()],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(4)
            for n in (1, 2):
                (HERE / f"diskstats-recorded-{n}.txt").write_text(
                    Path("/proc/diskstats").read_text()
                )
                (HERE / f"stat-recorded-{n}.txt").write_text(Path("/proc/stat").read_text())
                (HERE / f"pid-stat-pgbench-recorded-{n}.txt").write_text(
                    Path(f"/proc/{load.pid}/stat").read_text()
                )
                row = db.execute(query).fetchone()
                assert row is not None
                out = HERE.parent / "pgstats" / f"pg{major}-recorded-{n}.json"
                out.write_text(json.dumps(row[0], indent=1, default=str) + "\n")
                if n == 1:
                    time.sleep(1.0)
            (HERE / "meminfo-recorded.txt").write_text(Path("/proc/meminfo").read_text())
            load.wait()
            db.execute("CHECKPOINT")  # a requested one: immediate force wait
        assert target.server.server_log is not None
        lines = [
            line
            for line in target.server.server_log.read_text().splitlines()
            if "checkpoint starting:" in line or "checkpoint complete:" in line
        ]
        (HERE.parent / "checkpoints" / f"pg{major}-recorded.log").write_text(
            "\n".join(lines) + "\n"
        )
    finally:
        target.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
