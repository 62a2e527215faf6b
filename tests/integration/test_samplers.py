"""The samplers during real runs: a local cluster, an existing server, and (as root) data and
WAL on two loop devices made for the test, where what each device wrote can be checked
against what PostgreSQL says it did."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from howfast.targets.emulated.build import mount_argv
from tests.conftest import PgServer, shared_tmpdir
from tests.integration.conftest import Howfast
from tests.integration.loopdev import fresh_loop_device

pytestmark = pytest.mark.integration

LOCAL_PLAN = """
[settings]
shared_buffers = "32MB"

[[steps]]
workload = "pgbench-init"
scale = 1

[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2]
duration = "3s"
settings = { checkpoint_completion_target = 0.6 }

[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
transactions = 200
"""


def run_json(howfast: Howfast, *args: str) -> dict:
    out = howfast("run", *args, "--json")
    assert out.returncode == 0, out.stderr
    doc: dict = json.loads(out.stdout)
    return doc


def test_a_local_run_records_io_cpu_and_postgres_for_each_step(howfast: Howfast, target_dir):
    doc = run_json(howfast, str(howfast.plan(LOCAL_PLAN)), "--target", str(target_dir))
    init, tpcb, select = doc["steps"]
    assert [s["status"] for s in doc["steps"]] == ["completed"] * 3
    assert (init["io"], init["cpu"], init["postgres"]) == (None, None, None)  # not sampled

    roles = tpcb["io"]["roles"]
    assert isinstance(roles["data"]["device"], str) and roles["data"]["summary"]["write_iops"] > 0
    assert roles["wal"]["same_device_as"] == "data"  # one disk: recorded once, and said so
    m = tpcb["metrics"]
    assert m["io_data_write_bytes"] > 0 and "io_data_read_bytes" in m
    assert not any(name.startswith("io_wal_") for name in m)
    assert 0 < m["cache_hit_ratio"] <= 1
    assert m["wal_bytes"] > 0 and m["wal_records"] > 0
    assert m["pgbench_cpu_pct"] > 0 and "cpu_user_pct" in m
    assert isinstance(m["checkpoints"], int)
    postgres = tpcb["postgres"]
    assert postgres["server_version_num"] >= 100000
    assert postgres["views"]["pg_stat_database"]["xact_commit"] >= m["transactions"]
    assert postgres["checkpoints_source"] == "server log"
    assert tpcb["cpu"]["load_generator"]["threads"] >= 1

    # The step's own setting was in force for it, and the plan's again for the next one.
    assert tpcb["params"]["settings"] == {"checkpoint_completion_target": "0.6"}
    assert postgres["settings"]["checkpoint_completion_target"] == "0.6"
    assert select["postgres"]["settings"]["checkpoint_completion_target"] == "0.9"

    series = json.loads(howfast("results", "show", doc["id"], "--json", "--series").stdout)
    names = set(series["steps"][1]["series"])
    assert {"io.data.write_iops", "cpu.user_pct", "pg.wal_bytes_per_s", "tps"} <= names
    assert "pgbench.cpu_pct" in names
    assert howfast("results", "show", doc["id"]).returncode == 0


DSN_PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1

[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
transactions = 100
settings = { checkpoint_completion_target = 0.7 }
"""


def test_an_existing_server_is_sampled_through_its_views(howfast: Howfast, pg_server: PgServer):
    plan = str(howfast.plan(DSN_PLAN))
    doc = run_json(howfast, plan, "--target", pg_server.dsn, "--yes", "--sample-interval", "0.5s")
    step = doc["steps"][1]
    assert step["status"] == "completed"
    # Its settings are its own: the step runs, and says they were not applied.
    assert step["params"]["settings_applied"] is False
    assert any("settings were not applied" in w for w in step["warnings"])
    assert step["postgres"]["settings"]["checkpoint_completion_target"] != "0.7"
    assert step["io"]["roles"] == {}  # its disks are not visible from here
    assert step["postgres"]["views"]["pg_stat_wal"]["wal_records"] > 0
    assert step["postgres"]["checkpoints_source"] == "statistics views"
    assert step["io"]["interval_s"] == 0.5

    off = run_json(howfast, plan, "--target", pg_server.dsn, "--yes", "--sample-interval", "0")
    assert off["steps"][1]["io"] is None and "cache_hit_ratio" not in off["steps"][1]["metrics"]
    bad = howfast("run", plan, "--target", pg_server.dsn, "--sample-interval", "10ms")
    assert bad.returncode == 2 and "--sample-interval" in bad.stderr


# --- data and WAL on two loop devices ---------------------------------------------------------

BULK_SQL = "INSERT INTO howfast_bulk SELECT g, repeat('x', 200) FROM generate_series(1, 5000) g;\n"

LOOP_PLAN = """
[settings]
shared_buffers = "128MB"
max_wal_size = "1GB"          # no checkpoint of its own during the test...
checkpoint_timeout = "30min"
wal_init_zero = "off"         # ...and no WAL segments written full of zeros in advance

[[steps]]
workload = "pgbench-init"
scale = 1

[[steps]]
workload = "pgbench"
scripts = ["create.sql"]
clients = [1]
transactions = 1

[[steps]]                      # about 30 MB of rows, 35 MB of WAL, no checkpoint
workload = "pgbench"
scripts = ["bulk.sql"]
clients = [2]
transactions = 12

[[steps]]                      # ...then a checkpoint writes them to the data device
workload = "pgbench"
scripts = ["checkpoint.sql"]
clients = [1]
transactions = 1
"""


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.fixture
def loop_devices() -> Iterator[dict[str, tuple[str, Path]]]:
    """Two small ext4 filesystems on loop devices made for the test, with numbers never used
    since boot (tests/integration/loopdev.py: the state of a freshly booted machine's disk):
    role -> (device, empty directory)."""
    if os.geteuid() != 0:
        pytest.skip("creating loop devices needs root")
    missing = [p for p in ("losetup", "mkfs.ext4", "mount", "umount") if not shutil.which(p)]
    if missing or not Path("/dev/loop-control").exists():
        pytest.skip(f"no loop device support here ({', '.join(missing) or '/dev/loop-control'})")
    base = shared_tmpdir("howfast-loop-")
    mounts: list[Path] = []
    try:
        with contextlib.ExitStack() as devices:
            found: dict[str, tuple[str, Path]] = {}
            for role in ("data", "wal"):
                image = base / f"{role}.img"
                with image.open("wb") as f:
                    f.truncate(256 * 1024 * 1024)
                try:
                    device = devices.enter_context(fresh_loop_device(image))
                except (OSError, RuntimeError) as exc:
                    pytest.skip(f"cannot add a loop device here: {exc}")
                made = _run("mkfs.ext4", "-q", "-F", device)
                assert made.returncode == 0, made.stderr
                mount_point = base / role
                mount_point.mkdir()
                # As emulated volumes mount (noinit_itable: seen, 6 MB of inode tables zeroed
                # on the WAL device in a step that wrote 693 bytes of WAL)
                mounted = _run(*mount_argv(device, mount_point))
                if mounted.returncode != 0:
                    pytest.skip(f"cannot mount a loop device here: {mounted.stderr.strip()}")
                mounts.append(mount_point)
                bench = mount_point / "bench"
                bench.mkdir()
                for p in (mount_point, bench):
                    p.chmod(0o755)
                found[role] = (device, bench)
            try:
                yield found
            finally:
                for mount_point in reversed(mounts):
                    if _run("umount", str(mount_point)).returncode != 0:
                        _run("umount", "-l", str(mount_point))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_wal_and_data_on_two_loop_devices(howfast: Howfast, loop_devices):
    (data_dev, data_dir), (wal_dev, wal_dir) = loop_devices["data"], loop_devices["wal"]
    for name, text in (
        # the checkpoint: what pgbench -i left dirty is on the data device before the bulk step
        ("create.sql", "CREATE TABLE howfast_bulk (id int, pad text);\nCHECKPOINT;\n"),
        ("bulk.sql", BULK_SQL),
        ("checkpoint.sql", "CHECKPOINT;\n"),
    ):
        (howfast.workdir / name).write_text(text)
    plan = str(howfast.plan(LOOP_PLAN, name="loop.toml"))
    doc = run_json(howfast, plan, "--target", str(data_dir), "--wal-dir", str(wal_dir))
    assert [s["status"] for s in doc["steps"]] == ["completed"] * 4
    _, _, bulk, checkpoint = doc["steps"]

    roles = bulk["io"]["roles"]
    assert f"/dev/{roles['data']['device']}" == data_dev
    assert f"/dev/{roles['wal']['device']}" == wal_dev
    assert "same_device_as" not in roles["wal"]
    assert roles["wal"]["backing_device"]  # the disk under the image file, recorded

    # The WAL device wrote what PostgreSQL says it wrote as WAL (plus a little filesystem
    # journal), while the data device, with no checkpoint yet, wrote less than the WAL device.
    wal_stat = bulk["postgres"]["views"]["pg_stat_wal"]["wal_bytes"]
    wal_device = roles["wal"]["summary"]["write_bytes"]
    assert wal_stat > 20 * 1024 * 1024
    assert 0.8 * wal_stat < wal_device < 1.5 * wal_stat, (wal_device, wal_stat)
    assert abs(bulk["postgres"]["wal_bytes"] - wal_stat) < 0.05 * wal_stat
    assert bulk["metrics"]["checkpoints"] == 0

    # The forced checkpoint: the server log says what it wrote, and the data device wrote it.
    [event] = checkpoint["postgres"]["checkpoints"]
    assert event["reason"] == "requested" and event["flags"] == ["immediate", "force", "wait"]
    assert event["buffers"] > 2000
    # What the data device may write before it: the new table's pages, zeroed by each
    # extension in the page cache, when the kernel's writeback expires them during a step
    # that a loaded machine stretched (CI: 25 MB against 32 MB of WAL). At most the pages the
    # checkpoint then writes, and never the WAL.
    data_in_bulk = roles["data"]["summary"]["write_bytes"]
    assert data_in_bulk <= event["buffers"] * 8192 + 2 * 1024 * 1024, (data_in_bulk, event)
    assert data_in_bulk < 0.8 * wal_device, (data_in_bulk, wal_device)
    assert 0 <= event["start_t"] <= event["end_t"]
    written = checkpoint["io"]["roles"]["data"]["summary"]["write_bytes"]
    assert written >= 0.8 * event["buffers"] * 8192, (written, event["buffers"])
    assert checkpoint["io"]["roles"]["wal"]["summary"]["write_bytes"] < 0.1 * written
    series = json.loads(howfast("results", "show", doc["id"], "--json", "--series").stdout)
    data_mbps = series["steps"][3]["series"]["io.data.write_mbps"]
    assert max(value for _, value in data_mbps) > 0

    assert list(data_dir.iterdir()) == [] and list(wal_dir.iterdir()) == []
