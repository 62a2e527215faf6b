"""Records pg_stat_replication rows (STATE_QUERY, as libpq's text) of a local primary with two
standbys while pgbench runs, and just after start (lags NULL): tests/data/replication/*.json.

    .venv/bin/python tests/data/replication/record.py /var/tmp/some-empty-dir
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from howfast.machine.pgbin import choose_install
from howfast.targets import pgquery
from howfast.targets.local import LocalTarget
from howfast.targets.replicas.builders import STATE_QUERY
from howfast.targets.replicas.spec import ReplicaSpec

HERE = Path(__file__).parent


def rows(conn: object) -> list[list[str | None]]:
    with pgquery.connect(conn) as db:  # type: ignore[arg-type]
        cur = db.cursor(binary=False)
        cur.execute(STATE_QUERY)
        return [[None if v is None else str(v) for v in r] for r in cur.fetchall()]


def main(directory: Path) -> None:
    install = choose_install()
    target = LocalTarget(directory, install, replicas=ReplicaSpec(2, "on"))
    try:
        conn = target.start()
        assert conn is not None
        (HERE / "idle.json").write_text(json.dumps(rows(conn), indent=1) + "\n")
        pgbench = str(install.program("pgbench"))
        subprocess.run([pgbench, "-i", "-s", "1", "-q", *conn.pgbench_args()], check=True)
        load = subprocess.Popen([pgbench, "-c", "2", "-T", "4", *conn.pgbench_args()])
        time.sleep(2.5)
        (HERE / "busy.json").write_text(json.dumps(rows(conn), indent=1) + "\n")
        load.wait()
    finally:
        target.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
