"""A run whose cluster lives in memory (issue 26 minor): like `probe`, it says that its figures
are the RAM's, as the target starts and on each step when the run is read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import shared_tmpdir
from tests.integration.conftest import Howfast

pytestmark = pytest.mark.integration

PLAN = """
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "1s"
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mounts a tmpfs")
def test_a_run_on_tmpfs_says_its_figures_are_the_rams(howfast: Howfast, target_dir: Path):
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200m,mode=0755", "howfast-ram",
                    str(target_dir)], check=True)  # fmt: skip
    try:
        out = howfast("run", str(howfast.plan(PLAN)), "--target", str(target_dir), "--json")
    finally:
        subprocess.run(["umount", str(target_dir)], check=True)
    assert out.returncode == 0, out.stderr
    said = f"{target_dir} is on tmpfs, which lives in memory"
    assert f"warning: {said}" in " ".join(out.stderr.split())  # before the first step
    assert " ".join(out.stderr.split()).index(said) < out.stderr.index("[1/2]")
    steps = json.loads(out.stdout)["steps"]
    assert [s["workload"] for s in steps] == ["pgbench-init", "pgbench"]
    assert all(s["warnings"][0].startswith(said) for s in steps), steps
    shown = json.loads(howfast("results", "show", "1", "--json").stdout)  # derived on read
    assert [s["warnings"][0] for s in shown["steps"]] == [s["warnings"][0] for s in steps]


def test_wal_on_tmpfs_says_commits_wait_for_no_flush(howfast: Howfast, target_dir: Path):
    if shutil.disk_usage("/dev/shm").total == 0:
        pytest.skip("no /dev/shm here")
    wal = shared_tmpdir("howfast-wal-")
    try:
        shm_wal = Path("/dev/shm") / wal.name
        shm_wal.mkdir(mode=0o755)
        try:
            out = howfast("run", str(howfast.plan(PLAN)), "--target", str(target_dir),
                          "--wal-dir", str(shm_wal), "--json")  # fmt: skip
        finally:
            shutil.rmtree(shm_wal, ignore_errors=True)
    finally:
        shutil.rmtree(wal, ignore_errors=True)
    assert out.returncode == 0, out.stderr
    said = f"the WAL of {target_dir} is on tmpfs (/dev/shm), which lives in memory"
    assert said in " ".join(out.stderr.split())
    steps = json.loads(out.stdout)["steps"]
    assert all(s["warnings"][0].startswith(said) for s in steps), steps
