"""`howfast report` to a filesystem that fills up (issue 26, item 12): the report is written to
temporary files beside it and renamed into place, so that a full disk leaves neither a
truncated report nor an empty chart, and an earlier report of the same name is unchanged."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Howfast

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mounts a small tmpfs"),
]

PGBENCH = Path(__file__).parent.parent / "data" / "pgbench"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs: smaller than an HTML report (about 2 MB with its charts' script)."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "howfast-report-test", str(mount)],
                   check=True)  # fmt: skip
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def imported(howfast: Howfast, name: str) -> str:
    out = howfast("import", "pgbench", str(PGBENCH / name))
    assert out.returncode == 0, out.stderr
    return out.stderr.rsplit("stored as run ", 1)[1].split()[0]


def fill(directory: Path, leave_bytes: int) -> None:
    """Fill the filesystem, then free `leave_bytes` of it."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as out:  # unbuffered: the close has nothing to flush
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    os.truncate(filler, max(0, filler.stat().st_size - leave_bytes))


def contents(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != "filler"
    }


def test_an_html_report_that_does_not_fit_leaves_nothing(howfast: Howfast, small_fs: Path):
    run_id = imported(howfast, "multi-four-runs-pg15.txt")
    out = howfast("report", run_id, "-o", str(small_fs / "storage.html"))
    assert out.returncode == 2, out.stderr
    assert "storage.html: cannot write the report: No space left on device" in out.stderr
    assert "nothing was written" in out.stderr
    assert "Traceback" not in out.stderr
    assert list(small_fs.iterdir()) == []  # no truncated report, no temporary file


def test_a_markdown_report_that_does_not_fit_leaves_the_earlier_one(
    howfast: Howfast, small_fs: Path
):
    first, second = (
        imported(howfast, "run-multi-pg15.txt"),
        imported(howfast, "multi-four-runs-pg15.txt"),
    )
    report = small_fs / "storage.md"
    made = howfast("report", first, "-o", str(report))
    assert made.returncode == 0, made.stderr
    before = contents(small_fs)
    assert "storage-charts/chart-1.png" in before and "storage.md" in before
    fill(small_fs, leave_bytes=48 * 1024)  # room for a chart or so, not for six

    out = howfast("report", second, "-o", str(report))
    assert out.returncode == 2, out.stderr
    assert "storage.md: cannot write the report: No space left on device" in out.stderr
    unchanged = "the earlier storage.md and its charts in storage-charts/ are unchanged"
    assert f"nothing was written: {unchanged}" in out.stderr
    assert contents(small_fs) == before  # no empty chart, no half report, nothing removed
    assert sorted(p.name for p in small_fs.iterdir()) == ["filler", "storage-charts", "storage.md"]

    (small_fs / "filler").unlink()  # with room again, the new report replaces the old
    again = howfast("report", second, "-o", str(report))
    assert again.returncode == 0, again.stderr
    after = contents(small_fs)
    assert after["storage.md"] != before["storage.md"]
    assert all(after[name] for name in after)
    assert sorted(p.name for p in small_fs.iterdir()) == ["storage-charts", "storage.md"]


@pytest.mark.parametrize("command", [["export", "json"], ["export", "prometheus"]])
def test_an_export_that_does_not_fit_leaves_the_earlier_file(
    howfast: Howfast, small_fs: Path, command: list[str]
):
    """Exports write by the same rule (outfile.py): the flush to the disk fails, the earlier
    file keeps its content and mode, and no temporary file is left."""
    run_id = imported(howfast, "multi-four-runs-pg15.txt")
    path = small_fs / "runs.prom"
    path.write_text("earlier\n")
    path.chmod(0o600)
    fill(small_fs, leave_bytes=1024)  # an export of this run is several KiB
    out = howfast(*command, run_id, "-o", str(path))
    assert out.returncode == 2, out.stderr
    assert "No space left on device" in out.stderr and "Traceback" not in out.stderr
    assert "the earlier file is unchanged" in out.stderr
    assert path.read_text() == "earlier\n" and path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in small_fs.iterdir()) == ["filler", "runs.prom"]
