"""Working-set regimes on real servers: data sized from the memory, a memory-capped cgroup
around the server, cold and warm large reads, and the cgroup gone whatever happens.

Kept small for a 2-core machine: shared_buffers 16-32 MB, a 64 MiB cap, 4-second runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PgServer, pg_os_user
from tests.integration.conftest import Howfast, postgres_pids_under
from tests.integration.test_unprivileged import _interpreter_for

pytestmark = pytest.mark.integration

SMALL = ["--set", "shared_buffers=16MB", "--set", "maintenance_work_mem=8MB"]

IN_BUFFERS_PLAN = """
[settings]
shared_buffers = "32MB"
maintenance_work_mem = "8MB"
[[steps]]
workload = "pgbench-init"
dataset = "in-buffers"
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [2]
duration = "4s"
[[steps]]
workload = "seqread"
[[steps]]
workload = "seqread"
cold = false
"""

LONG_PLAN = """
[settings]
shared_buffers = "16MB"
maintenance_work_mem = "8MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "60s"
rate = 50  # it only holds the server while the test interrupts the run
"""


def _cgroups_usable() -> str | None:
    from howfast.machine.cgroup import detect

    support = detect()
    return None if support.version else support.reason


needs_cgroups = pytest.mark.skipif(
    _cgroups_usable() is not None, reason=f"no usable memory cgroup: {_cgroups_usable()}"
)


def _show(howfast: Howfast, run_id: object = 1) -> dict[str, Any]:
    out = howfast("results", "show", str(run_id), "--json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def _regimes_plan(howfast: Howfast) -> Path:
    """The built-in plan without its 30 s warm-ups, which --duration does not shorten."""
    text = howfast("plans", "regimes").stdout
    assert 'dataset = "on-disk"' in text
    return howfast.plan(text.replace('warmup = "30s"', ""), "regimes-test.toml")


@needs_cgroups
def test_regimes_plan_under_a_64mib_cap(howfast: Howfast, target_dir: Path):
    plan = _regimes_plan(howfast)
    args = ["--memory", "64MiB", *SMALL, "--clients", "2", "--duration", "4s"]
    out = howfast("run", str(plan), "--target", str(target_dir), *args, timeout=180)
    assert out.returncode == 0, out.stderr
    # The run ends with the four numbers, one row per target.
    assert "working-set regimes" in out.stdout
    for column in ("in-memory TPS", "on-disk TPS", "load time s", "large read s"):
        assert column in out.stdout
    doc = _show(howfast)
    target = doc["targets"][0]
    limit = 64 * 1024**2
    assert target["device"]["memory_limit_bytes"] == limit
    assert not Path(target["device"]["memory_cgroup"]["path"]).exists(), "cgroup removed"
    assert postgres_pids_under(target_dir) == [] and list(target_dir.iterdir()) == []

    init, seqread, on_disk, init_mem, in_memory = doc["steps"]
    assert [s["status"] for s in doc["steps"]] == ["completed"] * 5
    p, m = init["params"], init["metrics"]
    assert p["regime"] == "on-disk" and p["memory_basis"] == "--memory"
    assert p["memory_bytes"] == limit and p["scale"] == m["scale"] > 4
    assert m["dataset_target_bytes"] == 4 * limit
    assert abs(m["db_size_bytes"] - m["dataset_expected_bytes"]) < 0.1 * m["db_size_bytes"]
    assert m["bytes_per_scale"] > 10 * 1024**2 and m["shared_buffers_bytes"] == 16 * 1024**2
    # Later steps record the scale that was loaded, and the dataset.
    assert on_disk["params"]["scale"] == p["scale"] and on_disk["params"]["dataset"] == "on-disk"
    assert seqread["params"]["scale"] == p["scale"]
    assert in_memory["params"]["dataset"] == "in-memory"
    assert in_memory["params"]["scale"] == init_mem["params"]["scale"] < p["scale"]
    # Four times the cap: PostgreSQL misses its buffers and the misses reach the device.
    # Counted per transaction and against PostgreSQL's own misses, not in bytes: a 4 s step
    # reads 74 MiB on a quiet machine and 20 MiB on a busy one, as its TPS goes.
    om = on_disk["metrics"]
    assert om["cache_hit_ratio"] < 0.95
    asked_os = on_disk["postgres"]["views"]["pg_stat_database"]["blks_read"] * 8192
    assert asked_os > 0 and om["io_data_read_bytes"] >= 0.5 * asked_os  # the OS's cache is capped
    assert om["io_data_read_bytes"] >= 8192 * om["transactions"]  # a page a transaction at least
    assert om["cgroup_memory_peak_bytes"] <= limit * 1.05
    assert not any("read (almost) nothing" in w for w in on_disk["warnings"])
    # The cold read of a table four times the cap reads it from the device.
    sm = seqread["metrics"]
    assert sm["cache_cold"] is True and sm["device_read_bytes"] >= 0.8 * sm["table_bytes"]
    assert sm["seqread_s"] > 0 and sm["seqread_mbps"] > 0
    assert seqread["params"]["parallel_workers"] == 0 and "Seq Scan" in seqread["params"]["scan"]


@needs_cgroups
def test_in_buffers_reads_nothing_and_warm_reads_differ_from_cold(
    howfast: Howfast, target_dir: Path
):
    plan = howfast.plan(IN_BUFFERS_PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir), "--memory", "96MiB", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    init, bench, cold, warm = doc["steps"]
    assert init["params"]["regime"] == "in-buffers" and init["params"]["scale"] == 1
    # The server's own reads (its cgroup's, not the shared disk's, which others use too): a
    # select-only run over data that does not fit would read tens of MiB.
    assert bench["metrics"]["cache_hit_ratio"] > 0.97
    assert bench["io"]["postgres"]["roles"]["data"]["read_bytes"] < 4 * 1024**2
    assert cold["params"]["cache_reset"] == "restart, drop_caches"
    assert warm["params"]["cache_reset"] == "none" and warm["params"]["cold"] is False
    table = cold["metrics"]["table_bytes"]
    assert cold["metrics"]["cache_cold"] is True
    assert cold["metrics"]["device_read_bytes"] >= 0.8 * table
    # The warm read's own reads, from the server's cgroup: the disk's counters also carry
    # what the other test worker and the Kubernetes lab read meanwhile (4 MiB of a 13 MiB
    # table once in CI).
    assert cold["io"]["postgres"]["roles"]["data"]["read_bytes"] >= 0.8 * table
    assert warm["io"]["postgres"]["roles"]["data"]["read_bytes"] < 0.2 * table
    # The other test worker shares this disk, and howfast rightly says so when it reads there
    # during the step ("something else used the disk"); no other warning may appear.
    # The verdicts come from the server's own reads (its I/O cgroup), not from the disk's
    # counters, which once made this warm read "cold" in a loaded `make test`.
    assert cold["metrics"]["cache_cold_basis"] == warm["metrics"]["cache_cold_basis"] == "server"
    assert warm["metrics"]["cache_cold"] is False
    assert [w for w in warm["warnings"] if "something else used the disk" not in w] == []


@needs_cgroups
def test_interrupted_run_removes_the_cgroup(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(LONG_PLAN)
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--memory", "64MiB")
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + 120
    while "[2/2]" not in seen and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert "[2/2]" in seen, seen
    time.sleep(1.5)
    # howfast itself (its command line names the target) stays outside; the server is inside.
    groups = {_memory_cgroup(pid) for pid in postgres_pids_under(target_dir)}
    ours = [g for g in groups if g is not None and g.name.startswith("howfast-")]
    assert len(ours) == 1, groups
    group = ours[0]
    assert group.exists()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=90)
    assert proc.returncode == 130
    assert not group.exists()
    assert postgres_pids_under(target_dir) == [] and list(target_dir.iterdir()) == []


def _memory_cgroup(pid: int) -> Path | None:
    from howfast.machine.cgroup import CGROUP_ROOT, parse_proc_cgroup

    try:
        paths = parse_proc_cgroup(Path(f"/proc/{pid}/cgroup").read_text())
    except OSError:
        return None
    if "memory" in paths:
        return CGROUP_ROOT / "memory" / paths["memory"].lstrip("/")
    return CGROUP_ROOT / paths.get("", "/").lstrip("/")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to another user")
def test_memory_is_refused_where_cgroups_are_not_writable(target_dir: Path):
    user = pg_os_user()
    assert user is not None
    python, pythonpath = _interpreter_for(user.pw_uid, user.pw_gid)
    if python is None:
        pytest.skip(f"no Python with howfast's packages is readable by user {user.pw_name}")
    base = target_dir.parent
    for path in (base, target_dir):
        os.chown(path, user.pw_uid, user.pw_gid)
    env = {**os.environ, "HOWFAST_STORE": str(base / "r.db"), "HOME": str(base)}
    out = subprocess.run(
        [python, "-m", "howfast", "run", "quick", "--target", str(target_dir), "--memory", "1G"],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        env={**env, "PYTHONPATH": pythonpath},
        cwd=base,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "--memory needs a cgroup memory controller" in out.stderr
    assert "not writable" in out.stderr or "no cgroup memory controller" in out.stderr
    assert list(target_dir.iterdir()) == []  # refused before anything was created
    assert not (base / "r.db").exists() or "run 1" not in out.stderr


def test_memory_is_refused_for_a_server_uri(howfast: Howfast):
    out = howfast("run", "quick", "--target", "postgresql://u@127.0.0.1:1/db", "--memory", "1GiB")
    assert out.returncode == 2
    assert "--memory applies to directory targets only" in out.stderr


def test_dataset_and_seqread_on_an_existing_server(howfast: Howfast, pg_server: PgServer):
    steps = ('workload = "pgbench-init"\ndataset = "40MiB"', 'workload = "seqread"')
    plan = howfast.plan("".join(f"[[steps]]\n{s}\n" for s in steps))
    out = howfast("run", str(plan), "--target", pg_server.dsn, "--yes", "--json")
    assert out.returncode == 0, out.stderr
    init, read = json.loads(out.stdout)["steps"]
    assert init["params"]["regime"] == "size" and init["params"]["scale"] >= 2
    assert abs(init["metrics"]["db_size_bytes"] - 40 * 1024**2) < 12 * 1024**2
    assert read["params"]["dataset"] == "40MiB"
    assert read["metrics"]["seqread_s"] > 0 and read["metrics"]["table_bytes"] > 0
    # Neither restartable nor visible: said so, and no verdict rather than a wrong one.
    assert read["metrics"]["cache_cold"] is None and read["metrics"]["device_read_bytes"] is None
    assert any("existing server cannot be restarted" in w for w in read["warnings"])
