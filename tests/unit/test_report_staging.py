"""report/staging.py on a real directory: whole or nothing, and only a report's own images
replaced (the full-disk case is tests/integration/test_report_full_disk.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.outfile import output_file
from howfast.report.staging import staged


def test_a_new_report_replaces_the_old_images_and_leaves_other_files(tmp_path: Path):
    charts = tmp_path / "r-charts"
    charts.mkdir()
    for name, data in (("chart-1.png", b"old1"), ("chart-9.png", b"old9"), ("notes.txt", b"n")):
        (charts / name).write_bytes(data)
    (tmp_path / "r.md").write_text("old")
    with staged(output_file(str(tmp_path / "r.md"))) as staging:
        (staging.images_dir(charts) / "chart-1.png").write_bytes(b"new1")
        staging.write_document("new")
    assert (tmp_path / "r.md").read_text() == "new"
    assert {p.name: p.read_bytes() for p in charts.iterdir()} == {
        "chart-1.png": b"new1",
        "notes.txt": b"n",  # not the report's: left alone
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r-charts", "r.md"]
    assert (tmp_path / "r.md").stat().st_mode & 0o777 == 0o644


def test_an_error_while_writing_leaves_the_earlier_report_and_no_temporary_file(tmp_path: Path):
    (tmp_path / "r.md").write_text("old")
    with pytest.raises(OSError), staged(output_file(str(tmp_path / "r.md"))) as staging:
        (staging.images_dir(tmp_path / "r-charts") / "chart-1.png").write_bytes(b"x")
        staging.write_document("new")
        raise OSError(28, "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md"]
    assert (tmp_path / "r.md").read_text() == "old"


def test_through_a_link_the_file_it_names_is_replaced_and_its_mode_kept(tmp_path: Path):
    real = tmp_path / "published" / "r.html"
    real.parent.mkdir()
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "r.html"
    link.symlink_to(real)
    with staged(output_file(str(link))) as staging:
        staging.write_document("new")
    assert link.is_symlink() and real.read_text() == "new"
    assert real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["r.html"]
