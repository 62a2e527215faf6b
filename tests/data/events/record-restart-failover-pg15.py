#!/usr/bin/env python3
"""Re-record `restart-failover-pg15.json`: a local primary with one synchronous standby
(`--sync on`), tpcb-like at 2 clients for 12 s in 5 s segments, a restart at 3 s and a
failover at 7 s (the failover waits for the restart, which waits for the standby to stream
again: the walreceiver retries every 5 s). Stored: the event marks, the load record
(analysis/loadrecord.py) and the pgbench_history rows the promoted standby held after the
load, by the hundredth of a second of their mtime (epoch centiseconds). As root, from the
repository, with the installed PostgreSQL (the postgres OS user):

    .venv/bin/python tests/data/events/record-restart-failover-pg15.py OUTPUT.json
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from howfast.events.base import EventContext
from howfast.events.registry import actions
from howfast.events.schedule import EventSchedule
from howfast.machine.pgbin import choose_install
from howfast.model import JSONValue
from howfast.plugin.events import parse_event
from howfast.targets import pgquery
from howfast.targets.local import LocalTarget
from howfast.targets.replicas.spec import ReplicaSpec
from howfast.workloads.base import StepContext
from howfast.workloads.pgbench import survive_step

EVENTS = ("3s:restart", "7s:failover")
DURATION_S = 12
ROWS_BY_10MS = (
    "SELECT (extract(epoch FROM mtime AT TIME ZONE current_setting('TimeZone')) * 100)::bigint,"
    " count(*) FROM pgbench_history GROUP BY 1 ORDER BY 1"
)


def main() -> int:
    output = Path(sys.argv[1]).resolve()
    base = Path(tempfile.mkdtemp(prefix="howfast-record-", dir="/tmp"))
    base.chmod(0o755)
    target = LocalTarget(base, choose_install(), replicas=ReplicaSpec(1, "on"))
    try:
        conn = target.start()
        pgbench = target.install.program("pgbench")
        assert pgbench is not None
        subprocess.run([str(pgbench), "-i", "-q", "-s", "2", *conn.pgbench_args()],
                       check=True, capture_output=True)  # fmt: skip
        work = base / "work"
        work.mkdir()
        specs = [parse_event(t) for t in EVENTS]
        scratch = work / "events"
        schedule = EventSchedule(
            lambda now: EventContext(target, now, target.connection_now, scratch, DURATION_S),
            specs,
            actions(),
        )
        ctx = StepContext(target=target, connection=target.client_connection_now(follow=True),
                          install=target.install, work_dir=work, host=target.host())  # fmt: skip
        params: dict[str, JSONValue] = {"mode": "tpcb-like", "clients": 2,
                                        "duration_s": DURATION_S,
                                        "events": list(EVENTS), "segment": 5}  # fmt: skip
        outcome = survive_step.execute(ctx, params, schedule, program=str(pgbench), jobs=2,
                                       progress=False)  # fmt: skip
        with pgquery.connect(target.connection_now()) as db:
            rows = db.execute(ROWS_BY_10MS).fetchall()
        by_10ms = {str(c): int(str(n)) for c, n in rows}
        document = {
            "events": EVENTS,
            "marks": outcome.sections["events"],
            "load": outcome.sections["load"],
            "history_rows": sum(by_10ms.values()),
            "history_rows_by_10ms": by_10ms,
        }
        output.write_text(json.dumps(document, indent=1) + "\n")
    finally:
        target.stop()
        subprocess.run(["rm", "-rf", str(base)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
