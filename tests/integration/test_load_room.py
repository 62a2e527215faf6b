"""A load that fails, or cannot fit (issue 26, item 4): the steps that read its tables are
skipped naming it, never measured on half-loaded tables; and the room a load needs counts
its WAL (up to max_wal_size) and its primary keys' sort files, on real small filesystems
(tmpfs mounts this test makes and removes)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shared_tmpdir
from tests.integration.conftest import Howfast

pytestmark = pytest.mark.integration
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mounts a small tmpfs")

LOAD_THEN_READ = """
[settings]
shared_buffers = "16MB"
[[steps]]
workload = "pgbench-init"
scale = {scale}
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "1s"
"""


@contextmanager
def small_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "howfast-room",
                    str(directory)], check=True)  # fmt: skip
    try:
        yield directory
    finally:
        subprocess.run(["umount", str(directory)], check=True)


def run_json(howfast: Howfast, *args: str) -> tuple[int, dict[str, Any], str]:
    out = howfast("run", *args, "--json")
    return out.returncode, json.loads(out.stdout), out.stderr


def test_steps_after_a_failed_load_are_skipped_naming_it(howfast: Howfast, target_dir: Path):
    """The load fails (a tablespace that does not exist): the pgbench and seqread steps after
    it are skipped with the reason; a later load that works is read again."""
    plan = howfast.plan("""
[settings]
shared_buffers = "16MB"
[[steps]]
workload = "pgbench-init"
scale = 1
extra_args = ["--tablespace=no_such_tablespace"]
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "1s"
[[steps]]
workload = "seqread"
cold = false
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "1s"
""")
    status, doc, err = run_json(howfast, str(plan), "--target", str(target_dir))
    assert status == 1, err
    assert doc["status"] == "failed"
    steps = doc["steps"]
    assert [(s["workload"], s["status"]) for s in steps] == [
        ("pgbench-init", "failed"),
        ("pgbench", "skipped"),
        ("seqread", "skipped"),
        ("pgbench-init", "completed"),
        ("pgbench", "completed"),
    ]
    assert 'tablespace "no_such_tablespace" does not exist' in steps[0]["error"]
    for skipped in steps[1:3]:
        assert skipped["error"].startswith(
            "step 1 (pgbench -i scale 1) failed, so the tables this step reads are missing or "
            "incomplete: "
        ), skipped["error"]
        assert "no_such_tablespace" in skipped["error"]  # what went wrong, in one line
        assert skipped["metrics"] == {}
    assert "skipped: step 1 (pgbench -i scale 1) failed" in " ".join(err.split())
    assert steps[4]["metrics"]["tps"] > 0


@needs_root
def test_a_load_whose_wal_and_keys_do_not_fit_is_refused_before_it_loads(
    howfast: Howfast, target_dir: Path
):
    """The issue's case: scale 6 on a 182 MB volume passed the estimate, ran out of room
    while building the primary keys, and the next step was stored `completed` on tables
    without keys. The WAL of the load (up to max_wal_size) and the keys' sort files count."""
    plan = howfast.plan(LOAD_THEN_READ.format(scale=6))
    with small_tmpfs(target_dir, "182m"):
        status, doc, err = run_json(howfast, str(plan), "--target", str(target_dir))
        leftovers = list(target_dir.iterdir())
    assert status == 1, err
    init, read = doc["steps"]
    assert init["status"] == "failed" and read["status"] == "skipped", doc["steps"]
    error = " ".join(init["error"].split())
    assert error.startswith("scale 6 needs about"), error
    assert "per scale unit, measured:" in error  # one unit was loaded and measured first
    assert "of WAL (max_wal_size 1 GiB)" in error and "of sort files while the keys" in error
    assert (
        "free: not loaded (lower --scale, free space on the target, or give it a larger "
        "filesystem)" in error
    )
    assert "No space left" not in err and "PANIC" not in err
    assert read["error"].startswith("step 1 (pgbench -i scale 6) failed")
    assert leftovers == []


@needs_root
def test_what_fits_by_the_estimate_loads_and_runs(howfast: Howfast, target_dir: Path):
    """The estimate is not so generous that it refuses what fits: scale 3 on the same
    volume takes about 90 MB at its peak."""
    plan = howfast.plan(LOAD_THEN_READ.format(scale=3))
    with small_tmpfs(target_dir, "182m"):
        status, doc, err = run_json(howfast, str(plan), "--target", str(target_dir))
    assert status == 0, err
    assert [s["status"] for s in doc["steps"]] == ["completed", "completed"]
    assert doc["steps"][0]["metrics"]["scale"] == 3


@needs_root
def test_not_even_the_measuring_load_is_run_where_it_cannot_fit(howfast: Howfast, target_dir: Path):
    """The issue's other case: on a 64 MiB tmpfs the scale-1 load that measures a unit
    filled the filesystem. Scale 1 itself is refused as well, by the generous estimate."""
    with small_tmpfs(target_dir, "64m"):
        for scale in (2, 1):
            plan = howfast.plan(LOAD_THEN_READ.format(scale=scale))
            status, doc, err = run_json(howfast, str(plan), "--target", str(target_dir))
            assert status == 1, err
            init, read = doc["steps"]
            assert (init["status"], read["status"]) == ("failed", "skipped")
            error = " ".join(init["error"].split())
            assert error.startswith(f"scale {scale} needs about"), error
            assert "per scale unit, estimated before measuring:" in error
            assert "No space left" not in err and "PANIC" not in err
        assert list(target_dir.iterdir()) == []


@needs_root
def test_wal_on_a_small_filesystem_of_its_own_is_checked_there(howfast: Howfast, target_dir: Path):
    """--wal-dir on a 64 MiB tmpfs, the data on the disk: the load's 75 MiB of WAL cannot
    fit there, whatever room the data has."""
    wal_base = shared_tmpdir("howfast-wal-")
    wal = wal_base / "wal"
    wal.mkdir()
    try:
        with small_tmpfs(wal, "64m"):
            plan = howfast.plan(LOAD_THEN_READ.format(scale=6))
            status, doc, err = run_json(
                howfast, str(plan), "--target", str(target_dir), "--wal-dir", str(wal)
            )
            leftovers = list(wal.iterdir())
    finally:
        wal.rmdir()
        wal_base.rmdir()
    assert status == 1, err
    init, read = doc["steps"]
    error = " ".join(init["error"].split())
    assert error.startswith("scale 6 needs about") and "for its WAL (" in error, error
    assert f"but {wal}/howfast-" in error and "/pg_wal has" in error, error
    assert "on the WAL's filesystem" in error
    assert read["status"] == "skipped"
    assert "PANIC" not in err
    assert leftovers == []
