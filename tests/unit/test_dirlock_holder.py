"""A run refused because another holds the directory names that run's PID, even when it is
refused in the moment between the holder taking the lock and writing who it is (CI, loaded:
"is in use by a howfast run" with no PID). The holder here is a real second process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from howfast.errors import UsageError
from howfast.targets import dirlock

# takes the lock like dirlock does, says so, and writes its INFO only 0.4 s later
HOLDER = """
import fcntl, json, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
time.sleep(0.4)
with open(os.path.join(sys.argv[1], sys.argv[2]), "w") as f:
    f.write(json.dumps({"pid": os.getpid(), "since": "now", "run_id": None}))
sys.stdin.read()
"""


def _holder(directory: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), dirlock.INFO],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def _refused_naming_the_holder(directory: Path) -> None:
    proc = _holder(directory)
    try:
        with pytest.raises(UsageError) as refused:
            dirlock.lock_directory(directory, "target directory")
        assert f"(PID {proc.pid})" in str(refused.value), str(refused.value)
    finally:
        proc.communicate("", timeout=10)


def test_a_run_refused_before_the_holder_wrote_its_info_still_names_its_pid(
    tmp_path: Path,
) -> None:
    _refused_naming_the_holder(tmp_path)


def test_a_stale_info_of_a_gone_run_is_not_named_as_the_holder(tmp_path: Path) -> None:
    # a SIGKILLed run's file names a process that is gone; the new holder writes late
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    (tmp_path / dirlock.INFO).write_text(f'{{"pid": {gone.stdout.strip()}}}')
    _refused_naming_the_holder(tmp_path)
