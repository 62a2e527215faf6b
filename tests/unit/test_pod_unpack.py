"""What comes back from a pod (hosts/pod.py's unpack): the regular files collect_script sends,
written under the work directory; a member that would land elsewhere is not written."""

from __future__ import annotations

import base64
import io
import tarfile
from pathlib import Path

from howfast.hosts.pod import unpack


def _archive(members: list[tuple[tarfile.TarInfo, bytes]]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for info, data in members:
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return base64.b64encode(buffer.getvalue()).decode()


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def test_regular_files_land_under_the_work_directory_and_nothing_else(tmp_path: Path) -> None:
    into = tmp_path / "work"
    into.mkdir()
    link = tarfile.TarInfo("link")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    text = _archive(
        [
            (_file("pgbench_log.1"), b"0 1 2 3 4 5\n"),
            (_file("logs/agg.1"), b"agg\n"),
            (_file("/tmp/absolute"), b"no"),
            (_file("../outside"), b"no"),
            (link, b""),
        ]
    )
    files = unpack(text, into)
    assert files == {"pgbench_log.1": into / "pgbench_log.1", "logs/agg.1": into / "logs/agg.1"}
    assert (into / "pgbench_log.1").read_bytes() == b"0 1 2 3 4 5\n"
    assert (into / "logs/agg.1").read_text() == "agg\n"
    assert not (tmp_path / "outside").exists() and not (into / "link").exists()
    assert sorted(p.name for p in into.iterdir()) == ["logs", "pgbench_log.1"]


def test_an_empty_answer_is_no_files(tmp_path: Path) -> None:
    assert unpack("", tmp_path) == {}
