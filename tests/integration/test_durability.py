"""Durability and advice on real runs (docs/why.md): a cluster in memory and one with
fsync=off are each called not durable with the reason, one on this machine's disk is not, and
advice appears where what was measured supports it.

Kept small for a 2-core machine: scale 1 to 4, steps of 2 to 3 s, each logging every
transaction (`latency_log = "full"`): what is judged here (settings, flushes, wait events,
checkpoints) does not come from the latency log, and a sampled log would first need a
calibration run of a second before each step (workloads/pgbench/logsampling.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from howfast.targets.emulated.build import mount_argv
from tests.integration.conftest import Howfast

pytestmark = pytest.mark.integration

ONE_CLIENT = """
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "2s"
latency_log = "full"
"""

ADVICE_PLAN = """
[settings]
shared_buffers = "32MB"
max_wal_size = "32MB"          # the smallest: WAL volume starts the checkpoints
min_wal_size = "32MB"

[[steps]]
workload = "pg_test_fsync"     # the flush time of each wal_sync_method
seconds = 1

[[steps]]
workload = "pgbench-init"
scale = 4                      # a branch row per client: they queue on WAL flushes, not on a lock

[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [4]
duration = "3s"
latency_log = "full"

[[steps]]                      # every transaction rewrites 80,000 rows: megabytes of WAL each
workload = "pgbench"
scripts = ["wal.sql"]
clients = [1]
duration = "3s"
latency_log = "full"
"""
WAL_SQL = "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= 80000;\n"


@pytest.fixture
def memory_dir() -> Iterator[Path]:
    """A directory on /dev/shm (tmpfs) the unprivileged PostgreSQL user can reach."""
    base = Path(tempfile.mkdtemp(prefix="howfast-durability-", dir="/dev/shm"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run(howfast: Howfast, *args: str) -> dict[str, Any]:
    out = howfast("run", *args, "--json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def _by_setting(target: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["setting"]: a for a in target["advice"]}


def test_memory_is_not_durable_a_disk_is_not_called_so_and_advice_follows_the_evidence(
    howfast: Howfast, target_dir: Path, memory_dir: Path
):
    (howfast.workdir / "wal.sql").write_text(WAL_SQL)
    plan = howfast.plan(ADVICE_PLAN, name="advice.toml")
    doc = _run(howfast, str(plan), "--target", str(target_dir), "--target", str(memory_dir))
    disk, memory = doc["targets"]
    assert all(s["status"] == "completed" for s in doc["steps"]), doc["steps"]

    # In memory: not durable, whatever the settings, and said why.
    assert memory["device"]["data"]["fstype"] == "tmpfs"
    assert memory["durability"]["verdict"] == "not durable", memory["durability"]
    assert memory["durability"]["rule"] == "in memory"
    assert "in memory (tmpfs)" in memory["durability"]["reason"]
    assert memory["durability"]["consequence"] == "everything lost"
    assert "wal_sync_method" not in _by_setting(memory)  # no method's time is a flush's there

    # This machine's disk: never "not durable" with safe settings; the device's facts and
    # the flush pg_test_fsync timed are the evidence.
    durability = disk["durability"]
    assert durability["verdict"] != "not durable", durability
    assert durability["evidence"]["settings"]["fsync"] == "on"
    assert disk["device"]["data"]["device"].get("write_cache") in ("write back", "write through")
    timed = {f["source"]: f for f in durability["evidence"]["flushes"]}
    fsync_step = next(s for s in doc["steps"] if s["workload"] == "pg_test_fsync"
                      and s["target"] == disk["name"])  # fmt: skip
    assert timed["pg_test_fsync fdatasync"]["ms"] == pytest.approx(
        fsync_step["metrics"]["fdatasync_usecs"] / 1000
    )

    # commit_delay: the 4-client step waited on WAL flushes; half of pg_test_fsync's flush.
    busy = next(s for s in doc["steps"] if s["target"] == disk["name"]
                and s["params"].get("clients") == 4)  # fmt: skip
    share = busy["metrics"]["wait_commit_share"]
    assert share >= 0.3, f"the 4-client step waited on flushes only {share:.0%}: {busy['why']}"
    advice = _by_setting(disk)
    delay = advice["commit_delay"]
    assert delay["value"] == str(round(fsync_step["metrics"]["fdatasync_usecs"] / 2))
    assert delay["evidence"]["steps"][0]["wait_commit_share"] == round(share, 3)
    assert delay["try"] == f"--set commit_delay={delay['value']}" and delay["source"]
    assert advice["commit_siblings"]["value"] == "3"  # 4 clients: at most 3 others

    # max_wal_size: WAL volume started checkpoints during the WAL-heavy step.
    heavy = next(s for s in doc["steps"] if s["target"] == disk["name"]
                 and s["params"].get("scripts"))  # fmt: skip
    by_wal = [c for c in heavy["postgres"]["checkpoints"] if c["reason"] == "wal"]
    assert by_wal, heavy["postgres"]["checkpoints"]
    wal_size = advice["max_wal_size"]
    assert wal_size["current"] == "32MB" and wal_size["evidence"]["checkpoints_by_wal"] >= 1
    assert wal_size["evidence"]["wal_bytes"] == heavy["metrics"]["wal_bytes"]

    # Shown first: results show, compare and the report, before the verdicts and figures.
    report = howfast.workdir / "durability.md"
    shown, compared, made = howfast.together(
        ["results", "show", doc["id"]], ["compare", doc["id"]],
        ["report", doc["id"], "-o", str(report)],
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert text.index("Durability") < text.index("Why") < text.index("Advice")
    assert "[not durable]" in text and "commit_delay =" in text
    assert compared.returncode == 0, compared.stderr
    assert " ".join(compared.stdout.split()).startswith("Durability [")
    assert made.returncode == 0, made.stderr
    md = report.read_text()
    assert md.index("## Durability") < md.index("## Why") < md.index("## Advice")
    assert "| not durable |" in md


def test_fsync_off_is_not_durable_and_says_what_a_crash_costs(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(ONE_CLIENT)
    doc = _run(howfast, str(plan), "--target", str(target_dir), "--set", "fsync=off")
    (target,) = doc["targets"]
    assert target["settings"]["fsync"] == "off"
    durability = target["durability"]
    assert durability["verdict"] == "not durable", durability
    assert durability["rule"] == "fsync=off" and durability["consequence"] == "corruption"
    assert "can leave the database corrupt" in durability["reason"]
    # The same, read back from the store.
    shown = howfast("results", "show", doc["id"], "--json")
    assert json.loads(shown.stdout)["targets"][0]["durability"] == durability


@pytest.mark.parametrize("fsync", ["on", "off"])
def test_an_existing_servers_settings_are_judged_and_its_storage_is_unknown(
    howfast: Howfast, fsync: str
):
    from tests.conftest import PASSWORD, running_cluster

    with running_cluster(f"-c fsync={fsync}") as server:
        dsn = f"postgresql://bench:{PASSWORD}@127.0.0.1:{server.port}/postgres"
        doc = _run(howfast, str(howfast.plan(ONE_CLIENT)), "--target", dsn, "--yes")
    (target,) = doc["targets"]
    assert "linux" in target["device"]["server_platform"]
    durability = target["durability"]
    assert durability["evidence"]["platform"] == "linux"
    if fsync == "off":
        assert durability["verdict"] == "not durable" and durability["rule"] == "fsync=off"
        return
    assert durability["verdict"] == "unknown", durability
    assert "out of howfast's sight" in durability["reason"]


@pytest.fixture
def loop_in_memory(memory_dir: Path) -> Iterator[Path]:
    """An ext4 filesystem on a loop device whose backing file is in /dev/shm: a block device
    on the outside, memory underneath. Yields an empty directory on it."""
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
        pytest.skip("creating loop devices needs root, losetup and mkfs.ext4")
    image = memory_dir / "volume.img"
    with image.open("wb") as f:
        f.truncate(64 * 1024 * 1024)
    attached = subprocess.run(["losetup", "--find", "--show", str(image)],
                              capture_output=True, text=True, check=False)  # fmt: skip
    if attached.returncode != 0:
        pytest.skip(f"no free loop device: {attached.stderr.strip()}")
    device = attached.stdout.strip()
    mount_point = memory_dir / "mnt"
    mounted = False
    try:
        made = subprocess.run(["mkfs.ext4", "-q", "-F", device], capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        mount_point.mkdir()
        mounted = subprocess.run(mount_argv(device, mount_point), check=False).returncode == 0
        if not mounted:
            pytest.skip("cannot mount a loop device here")
        bench = mount_point / "bench"
        bench.mkdir()
        for p in (mount_point, bench):
            p.chmod(0o755)
        yield bench
    finally:
        if mounted and subprocess.run(["umount", str(mount_point)]).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)])
        subprocess.run(["losetup", "-d", device], check=False)


def test_a_loop_device_on_a_file_in_memory_is_in_memory(howfast: Howfast, loop_in_memory: Path):
    out = howfast("probe", str(loop_in_memory), "--profile", "wal-fsync", "--runtime", "1s",
                  "--size", "8MiB", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    shown = howfast("results", "show", json.loads(out.stdout)["id"], "--json")
    (target,) = json.loads(shown.stdout)["targets"]
    device = target["device"]["data"]
    assert device["fstype"] == "ext4" and device["device"]["name"].startswith("loop")
    assert device["device"]["backing_fstype"] == "tmpfs"  # recorded at run time
    durability = target["durability"]
    assert durability["verdict"] == "not durable" and durability["rule"] == "in memory"
    assert "a loop device on a file in memory" in durability["reason"]
    assert "database" not in durability["reason"]  # a probe: no database there
