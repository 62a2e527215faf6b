"""Why, on real servers: each verdict provoked on purpose and asserted, and PostgreSQL's own
I/O told apart from another process writing to the same (loop) device.

Kept small for a 2-core machine: scale 1, steps of 5 to 8 s.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from howfast.analysis.own_io import MIN_WAL_BYTES
from howfast.targets.emulated.volume import available
from tests.integration.conftest import Howfast
from tests.integration.loopdev import throttle_ever_set
from tests.integration.test_samplers import loop_devices  # noqa: F401  (a fixture)

pytestmark = pytest.mark.integration

VERDICT_PLAN = """
[settings]
shared_buffers = "32MB"

[[steps]]
workload = "fio"
profiles = ["wal-fsync"]
size = "16MiB"
runtime = "3s"

[[steps]]
workload = "pgbench-init"
scale = 1

[[steps]]                      # one client committing: each commit waits for its WAL flush
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "8s"

[[steps]]                      # eight clients on one branch row: they queue on its lock
workload = "pgbench"
modes = ["tpcb-like"]
clients = [8]
jobs = 2
duration = "6s"

[[steps]]                      # the same one client without flushes: never storage-bound
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "6s"
settings = { fsync = "off", synchronous_commit = "off" }

[[steps]]                      # pgbench busy with itself; the server waits for it
workload = "pgbench"
scripts = ["spin.sql"]
clients = [1]
duration = "5s"
"""

# Meta-commands only, and a trivial query now and then: pgbench's thread spins on its own
# work while its session mostly waits for it.
SPIN_SQL = "\n".join(f"\\set x{i} random(1, 1000) * {i}" for i in range(400)) + "\nSELECT 1;\n"


def _show(howfast: Howfast, run_id: str) -> dict[str, Any]:
    out = howfast("results", "show", run_id, "--json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


@pytest.mark.emulated  # on a volume that adds 2 ms per write, when this machine can build one
def test_each_verdict_provoked(howfast: Howfast, target_dir: Path):
    (howfast.workdir / "spin.sql").write_text(SPIN_SQL)
    plan = howfast.plan(VERDICT_PLAN, name="why.toml")
    # On a fast local disk a 1-client commit waits little for its flush, and the round trips
    # can dominate instead; on a volume that adds 2 ms per write the commit path must.
    slower = ["--storage-latency", "2ms", "--storage-size", "512MiB"]
    emulated = available().name is not None
    out = howfast("run", str(plan), "--target", str(target_dir), "--json",
                  *(slower if emulated else []))  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    steps = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    commit, locks, unflushed, spin = steps
    for s in steps:
        assert s["status"] == "completed", s["error"]
        assert s["postgres"]["wait_sampling"]["source"] == "pg_stat_activity"
        assert s["why"]["verdict"] and s["why"]["verdict_reason"]

    # Commit latency: the commit path dominates, and the probe's ceiling is beside it.
    if not emulated:
        pytest.skip(f"no slower volume to commit on: {available().reason}")
    assert commit["why"]["verdict"] == "storage latency", commit["why"]
    assert commit["metrics"]["wait_commit_share"] >= 0.3
    assert "commits/s the storage allows" in commit["why"]["verdict_reason"]
    events = {(e["wait_event_type"], e["wait_event"]) for e in commit["postgres"]["wait_events"]}
    assert ("IO", "WALSync") in events
    assert abs(sum(e["share"] for e in commit["postgres"]["wait_events"]) - 1) < 0.01

    # Lock contention, named with its cause.
    assert locks["why"]["verdict"] == "lock contention", locks["why"]
    assert locks["metrics"]["wait_lock_share"] >= 0.3
    assert "scale 1 < clients 8" in locks["why"]["verdict_reason"]

    # Without flushes the same client is not storage-bound.
    assert unflushed["postgres"]["settings"]["fsync"] == "off"
    assert unflushed["why"]["verdict"] != "storage latency", unflushed["why"]
    assert unflushed["metrics"].get("wait_commit_share", 0) < 0.3

    # The load generator.
    assert spin["why"]["verdict"] == "load generator", spin["why"]

    # Shown first: results show, and the report's Why section.
    shown = howfast("results", "show", doc["id"])
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert text.index("Why") < text.index("pgbench tpcb-like")
    assert "is limited by WAL flush latency" in text and "is limited by lock contention" in text
    report = howfast.workdir / "why.md"
    made = howfast("report", doc["id"], "-o", str(report))
    assert made.returncode == 0, made.stderr
    md = report.read_text()
    assert md.index("## Why") < md.index("## Runs") and "wait profile" in md
    assert _show(howfast, doc["id"])["steps"][2]["why"] == commit["why"]


ATTRIBUTION_PLAN = """
[settings]
shared_buffers = "32MB"
max_wal_size = "1GB"
checkpoint_timeout = "30min"
wal_init_zero = "off"

[[steps]]
workload = "pgbench-init"
scale = 1

[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2]
duration = "8s"
"""


def test_postgres_own_io_on_a_device_another_process_writes_to(
    howfast: Howfast,
    loop_devices: dict[str, tuple[str, Path]],  # noqa: F811
):
    _device, bench = loop_devices["data"]
    other = bench.parent / "other"
    stop = threading.Event()

    def write_elsewhere() -> None:
        # Another tenant of the disk: direct writes, all the while the test runs.
        while not stop.is_set():
            subprocess.run(
                ["dd", "if=/dev/zero", f"of={other}", "bs=1M", "count=64", "oflag=direct"],
                capture_output=True,
                check=False,
            )

    plan = howfast.plan(ATTRIBUTION_PLAN, name="attr.toml")
    writer = threading.Thread(target=write_elsewhere, daemon=True)
    writer.start()
    try:
        out = howfast("run", str(plan), "--target", str(bench), "--json")
    finally:
        stop.set()
        writer.join(30)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    step = doc["steps"][-1]
    m = step["metrics"]
    own = step["io"]["postgres"]
    assert own["source"].startswith("cgroup") and own["cgroup"]
    assert not Path(own["cgroup"]).exists(), "the I/O cgroup is removed at stop"
    # PostgreSQL's own writes: its WAL writes (a page per flush at most twice over) and the
    # buffers written by checkpoints, the background writer and backends.
    views = step["postgres"]["views"]
    wal = views["pg_stat_wal"]
    bg = views["pg_stat_bgwriter"]
    buffers = sum(bg.get(k, 0) for k in ("buffers_checkpoint", "buffers_clean", "buffers_backend"))
    expected = 2 * 8192 * wal["wal_write"] + 8192 * buffers + m["wal_bytes"]
    assert m["wal_bytes"] * 0.5 <= m["pg_write_bytes"] <= 1.5 * expected + (8 << 20), (m, wal)
    assert m["pg_io_data_write_iops"] > 0
    # The device wrote what the other process did as well: the warning says so.
    assert m["io_data_write_bytes"] > 2 * m["pg_write_bytes"]
    assert any("something else used the disk" in w for w in step["warnings"]), step["warnings"]
    if m["wal_bytes"] >= MIN_WAL_BYTES:  # a starved step (a loaded machine) may write less
        assert m["pg_write_amplification"] < m["io_write_amplification"]
    else:  # and then neither ratio is given: bytes per WAL byte of so little WAL mean nothing
        assert "pg_write_amplification" not in m and "io_write_amplification" not in m


FRESH_DISK_PLAN = """
[settings]
shared_buffers = "32MB"

[[steps]]
workload = "pgbench-init"
scale = 1

[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2]
duration = "4s"
"""


def test_postgres_own_io_on_a_disk_no_throttle_rule_ever_touched(
    howfast: Howfast,
    loop_devices: dict[str, tuple[str, Path]],  # noqa: F811
):
    """A freshly booted machine's disk (a new loop device): cgroup v1 on Linux 6.10+ counts
    nothing there until howfast turns counting on. Independent sources: pg_stat_wal's
    wal_bytes (what the server's own writes must at least hold) and the loop device's own
    counters (used by nothing else: at least what the server wrote)."""
    device, bench = loop_devices["data"]
    devnum = Path(f"/sys/class/block/{Path(device).name}/dev").read_text().strip()
    assert not throttle_ever_set(devnum), "the fixture's device is not fresh"
    out = howfast("run", str(howfast.plan(FRESH_DISK_PLAN)), "--target", str(bench), "--json")
    assert out.returncode == 0, out.stderr
    step = json.loads(out.stdout)["steps"][-1]
    m, own = step["metrics"], step["io"]["postgres"]
    assert own["source"].startswith("cgroup"), own
    assert own.get("pg_io_source") == "cgroup", own  # it counted: no fallback was needed
    assert m["wal_bytes"] > 0
    assert m["pg_write_bytes"] >= m["wal_bytes"], (m["pg_write_bytes"], m["wal_bytes"])
    assert m["pg_io_data_write_bytes"] >= m["wal_bytes"]
    # The device saw at least what the server submitted (1 MiB: requests in flight when the
    # two counters were read, a moment apart).
    assert m["io_data_write_bytes"] >= m["pg_io_data_write_bytes"] - (1 << 20), m
    assert not any("something else used the disk" in w for w in step["warnings"]), step["warnings"]


HOT_ROW = """
memory = "96MiB"
[settings]
shared_buffers = "16MB"
maintenance_work_mem = "16MB"
[[steps]]
workload = "pgbench-init"
dataset = "on-disk"
[[steps]]
workload = "pgbench"
scripts = ["hot.sql"]
clients = [2]
duration = "4s"
"""


def test_an_on_disk_step_served_by_memory_is_called_so(howfast: Howfast, target_dir: Path):
    """An on-disk dataset (4x the 96 MiB cap) read through one hot row: shared_buffers serves
    it all, so the step measured memory, not the storage, and the verdict says so."""
    from tests.integration.test_regimes import _cgroups_usable

    if _cgroups_usable() is not None:
        pytest.skip(f"no usable memory cgroup: {_cgroups_usable()}")
    (howfast.workdir / "hot.sql").write_text(
        "\\set aid 1\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
    )
    out = howfast("run", str(howfast.plan(HOT_ROW)), "--target", str(target_dir), "--json")
    assert out.returncode == 0, out.stderr
    init, step = json.loads(out.stdout)["steps"]
    assert init["metrics"]["db_size_bytes"] > 3 * 96 * 2**20  # really larger than memory
    assert step["why"]["verdict"] == "memory/cache", step["why"]
    assert "read (almost) nothing from the device" in step["why"]["verdict_reason"]
    assert step["metrics"]["cache_hit_ratio"] >= 0.99


def test_wait_events_come_from_pg_wait_sampling_when_installed(howfast: Howfast):
    """On a server with the extension loaded and created, the wait profile is its profile
    (sampled inside the server), and the document says which source was used."""
    from tests.conftest import PASSWORD, pg_bindir, running_cluster

    bindir = pg_bindir()
    if bindir is None or not (bindir.parent / "lib" / "pg_wait_sampling.so").exists():
        pytest.skip(
            "pg_wait_sampling is not installed (apt-get install postgresql-15-pg-wait-sampling)"
        )
    with running_cluster("-c shared_preload_libraries=pg_wait_sampling") as server:
        server.psql("CREATE EXTENSION pg_wait_sampling")
        dsn = f"postgresql://bench:{PASSWORD}@127.0.0.1:{server.port}/postgres"
        plan = howfast.plan(
            '[[steps]]\nworkload = "pgbench-init"\nscale = 1\n[[steps]]\nworkload = "pgbench"\n'
            'modes = ["tpcb-like"]\nclients = [2]\nduration = "4s"\n'
        )
        out = howfast("run", str(plan), "--target", dsn, "--yes", "--json")
    assert out.returncode == 0, out.stderr
    step = json.loads(out.stdout)["steps"][1]
    postgres = step["postgres"]
    assert postgres["wait_sampling"]["source"] == "pg_wait_sampling", postgres["wait_sampling"]
    assert sum(postgres["wait_sampling"]["counts"].values()) > 0
    assert step["why"]["verdict"]  # a verdict from that profile
