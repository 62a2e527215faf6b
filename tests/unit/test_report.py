"""The HTML and Markdown reports of a fixed store: the numbers in their tables, the charts'
data, and that the page asks nothing of any other host."""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
import statistics
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from howfast.cli.app import cli
from howfast.errors import UsageError
from howfast.model import Sample
from howfast.report.output import report_format
from howfast.store import SqlStore
from tests.unit.stored_runs import fio, init, open_temp_store, pgbench, store_run

T975_2 = 4.302652729911275  # Student's t, 97.5th percentile, 2 degrees of freedom
RAMP = [500.0, 800.0] + [1000.0, 1010.0, 990.0, 1000.0] * 3  # 14 seconds, settles at second 3
WARNING = "the dataset fits in memory: this is not an on-disk test"


def _with_io_and_checkpoints(step):
    step.series["io.data.write_iops"] = [Sample(float(t), 200.0 + t) for t in range(1, 15)]
    step.series["io.wal.write_mbps"] = [Sample(float(t), 3.5) for t in range(1, 15)]
    checkpoints = [{"reason": "wal", "start_t": 4.0, "end_t": 9.5}]
    return replace(step, sections={"postgres": {"checkpoints": checkpoints}})


def fixed_store(db: SqlStore) -> list[int]:
    """Run 1: two directories, tpcb-like at 4 clients three times on each, a load and the
    probe; run 2: the first directory again, once."""
    steps = [init("/mnt/a", 10.0), init("/mnt/b", 14.0)]
    steps.append(pgbench("/mnt/a", 400.0, warmup=True))
    for i, tps in enumerate([1000.0, 1010.0, 990.0], start=1):
        warnings = [WARNING] if i == 2 else []
        step = pgbench("/mnt/a", tps, repetition=i, per_second=RAMP, warnings=warnings)
        steps.append(_with_io_and_checkpoints(step) if i == 1 else step)
    steps += [
        pgbench("/mnt/b", tps, repetition=i) for i, tps in enumerate([700.0, 800.0, 600.0], 1)
    ]
    steps += [
        fio("/mnt/a", "rand-read-4k-qd64", read_iops=45000.0, read_mbps=175.8, read_lat_avg_ms=1.4),
        fio("/mnt/a", "randrw-4k-qd1", read_iops=2100.0, write_iops=2095.0,
            read_lat_avg_ms=0.21, write_lat_avg_ms=0.26),
        fio("/mnt/a", "wal-fsync", write_iops=900.0, write_lat_avg_ms=0.05, sync_lat_avg_ms=1.0,
            commit_ceiling_tps=952.4),
    ]  # fmt: skip
    first = store_run(db, steps, targets=["/mnt/a", "/mnt/b"], label="nvme vs ceph")
    second = store_run(db, [init("/mnt/a", 11.0), pgbench("/mnt/a", 1200.0)])
    return [first, second]


class Tables(HTMLParser):
    """Every table of a page as its caption and rows of cell texts, note marks included."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._caption: str | None = None
        self._rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._in_caption = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._caption, self._rows = "", []
        elif tag == "caption":
            self._in_caption = True
        elif tag == "tr":
            self._rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._caption is not None:
            self.tables[self._caption] = self._rows
            self._caption = None
        elif tag == "caption":
            self._in_caption = False
        elif tag in ("td", "th") and self._cell is not None:
            self._rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._in_caption and self._caption is not None:
            self._caption += data
        elif self._cell is not None:
            self._cell.append(data)


def rows_by(table: list[list[str]], *keys: str) -> dict[tuple[str, ...], dict[str, str]]:
    header, *rows = table
    as_dicts = [dict(zip(header, row, strict=True)) for row in rows]
    return {tuple(r[k] for k in keys): r for r in as_dicts}


@pytest.fixture
def report_store(tmp_path: Path) -> tuple[str, list[int]]:
    db = open_temp_store(tmp_path)
    try:
        ids = fixed_store(db)
    finally:
        db.close()
    return str(tmp_path / "results.db"), ids


def make_report(store: str, ids: list[int], out: Path) -> str:
    args = ["report", *map(str, ids), "-o", str(out), "--store", store]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return out.read_text()


def packed(page: str, element_id: str) -> bytes:
    found = re.search(rf'<script type="application/octet-stream" id="{element_id}">(.*?)</script>',
                      page, re.S)  # fmt: skip
    assert found, element_id
    return gzip.decompress(base64.b64decode(found.group(1)))


def test_html_tables_carry_the_numbers(report_store: tuple[str, list[int]], tmp_path: Path) -> None:
    store, ids = report_store
    page = make_report(store, ids, tmp_path / "storage.html")
    parser = Tables()
    parser.feed(page)
    pgbench = rows_by(parser.tables["pgbench tpcb-like"], "target", "clients")
    a = pgbench[("run 1 (nvme vs ceph) /mnt/a", "4")]
    assert a["n"] == "3"
    # mean 1000, stdev 10: ± 10 × t / √3; the step's warning is note [1] on its TPS
    assert a["TPS (tx/s)"] == f"1,000.0 ± {10 * T975_2 / math.sqrt(3):.1f}[1]"
    assert a["TPS CV"] == "1.0%"
    latencies = [4000 / tps for tps in (1000.0, 1010.0, 990.0)]
    half = statistics.stdev(latencies) * T975_2 / math.sqrt(3)
    assert a["avg latency (ms)"] == f"{statistics.fmean(latencies):.3f} ± {half:.3f}"
    # Steady state: the median of the second half is 1000; 500 and 800 are left out.
    assert a["skipped at start"] == "2 s"
    assert a["steady TPS (tx/s)"].startswith(f"{statistics.fmean(RAMP[2:]):,.1f}")
    b = pgbench[("run 1 (nvme vs ceph) /mnt/b", "4")]
    assert b["TPS (tx/s)"].startswith("700.0 ± 248.4")  # stdev 100
    assert "[" in b["TPS (tx/s)"]  # a spread of 14% is flagged beside the number
    assert pgbench[("run 2 /mnt/a", "4")]["TPS (tx/s)"] == "1,200.0"
    assert WARNING in page

    load = rows_by(parser.tables["pgbench -i: load time and its phases"], "target")
    assert load[("run 1 (nvme vs ceph) /mnt/b",)]["load time (s)"] == "14.00"
    assert load[("run 1 (nvme vs ceph) /mnt/b",)]["generate (s)"] == "8.40"
    assert load[("run 1 (nvme vs ceph) /mnt/a",)]["database size"] == "160 MiB"
    fio_rows = rows_by(parser.tables["Storage probe (fio)"], "profile")
    assert fio_rows[("rand-read-4k-qd64",)]["read IOPS"] == "45,000"
    assert fio_rows[("randrw-4k-qd1",)]["write latency avg (ms)"] == "0.260"

    environment = rows_by(parser.tables["Environment of each target"], "target")
    assert environment[("run 1 (nvme vs ceph) /mnt/a",)]["PostgreSQL"] == "16.4"
    assert "ext4 on nvme0n1p2" in environment[("run 1 (nvme vs ceph) /mnt/a",)]["storage"]

    comparison = parser.tables["Comparison with run 1"]
    assert any(row[1].startswith("pgbench tpcb-like, 4 clients") and row[2] == "TPS (tx/s)"
               for row in comparison)  # fmt: skip
    warm_up = "Warm-up runs, left out of every figure"
    assert warm_up in page
    assert all(not row["TPS (tx/s)"].startswith("400") for row in pgbench.values())


def test_html_is_self_contained_with_charts(
    report_store: tuple[str, list[int]], tmp_path: Path
) -> None:
    store, ids = report_store
    page = make_report(store, ids, tmp_path / "storage.html")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page
    figures = json.loads(packed(page, "howfast-charts"))
    plots = re.findall(r'<div class="plot" id="(chart-\d+)"', page)
    assert sorted(plots) == sorted(figures)
    titles = [f["layout"]["title"]["text"] for f in figures.values()]
    assert "pgbench tpcb-like: TPS by clients (mean ± 95% CI)" in titles
    by_title = {f["layout"]["title"]["text"]: f for f in figures.values()}
    tps_chart = by_title["pgbench tpcb-like: TPS by clients (mean ± 95% CI)"]
    assert tps_chart["layout"]["yaxis"]["title"]["text"] == "TPS (tx/s)"
    assert tps_chart["data"][0]["y"] == [1000.0]
    assert tps_chart["data"][0]["error_y"]["array"] == [pytest.approx(24.84, abs=0.01)]
    per_second = next(f for t, f in by_title.items() if "TPS and latency per second" in t)
    assert per_second["layout"]["yaxis2"]["title"]["text"] == "latency (ms)"
    assert len(per_second["data"]) == 6  # TPS and latency of 3 repetitions
    shapes = per_second["layout"]["shapes"]
    assert [(s["x0"], s["x1"]) for s in shapes] == [(4.0, 9.5), (0.0, 2.0)]  # checkpoint, skip
    io = next(f for t, f in by_title.items() if "disk I/O per second" in t)
    assert {d["name"] for d in io["data"]} == {"data write IOPS", "wal write MB/s"}
    assert any("queue depth 1" in t for t in titles)
    assert any("load time by phase" in t for t in titles)
    library = packed(page, "howfast-plotly")
    assert len(library) > 1_000_000 and b"Plotly" in library[:5000] + library[-5000:]


def test_markdown_has_the_same_tables_and_png_charts(
    report_store: tuple[str, list[int]], tmp_path: Path
) -> None:
    store, ids = report_store
    text = make_report(store, ids[:1], tmp_path / "storage.md")
    assert "| run 1 (nvme vs ceph) /mnt/a |" not in text  # one run: targets by their name
    row = next(line for line in text.splitlines() if line.startswith("| /mnt/a | 4 | 3 |"))
    assert f"1,000.0 ± {10 * T975_2 / math.sqrt(3):.1f} [1]" in row
    assert "| 2 s |" in row
    assert f"[1] {WARNING}" in text
    images = re.findall(r"!\[[^\]]*\]\((storage-charts/chart-\d+\.png)\)", text)
    assert len(images) >= 6
    for image in images:
        assert (tmp_path / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_format_from_the_suffix(tmp_path: Path) -> None:
    assert report_format(tmp_path / "a.HTML") == "html"
    assert report_format(tmp_path / "a.md") == "markdown"
    with pytest.raises(UsageError, match=r"\.html"):
        report_format(tmp_path / "a.pdf")


def test_many_tests_leave_out_the_per_second_charts(
    report_store: tuple[str, list[int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from howfast.report import charts, output

    store, ids = report_store
    db = open_temp_store(tmp_path)
    try:
        runs = [db.get_run(i) for i in ids]
    finally:
        db.close()
    assert "io.data.write_iops" in output.series_to_read(runs)  # type: ignore[arg-type]
    monkeypatch.setattr(charts, "MAX_PER_SECOND_TESTS", 2)
    monkeypatch.setattr(output, "MAX_PER_SECOND_TESTS", 2)
    assert output.series_to_read(runs) == ["tps", "latency_ms"]  # type: ignore[arg-type]
    page = make_report(store, ids, tmp_path / "many.html")
    assert "Per-second charts are left out: this report covers 3 pgbench tests" in page
    assert "TPS and latency per second" not in json.dumps(
        json.loads(packed(page, "howfast-charts"))
    )


def test_a_failed_step_summary_shows_its_cause_but_not_the_server_log():
    from howfast.cli.progress import step_summary
    from howfast.model import StepRecord

    error = (
        "pgbench exited with status 1:\n"
        "pgbench: error: could not open file txlog/tx.123: No space left on device\n"
        "\n"
        "pgbench: fatal: Run was aborted; the above results are incomplete.\n"
        "--- server log (last lines) ---\n"
        "2026-11-24 LOG:  checkpoint starting: time\n"
    )
    record = StepRecord("t", "pgbench", {}, "failed", "a", "b", error=error)
    lines = step_summary(record).splitlines()
    assert lines[0] == "failed: pgbench exited with status 1:"
    assert [line.strip() for line in lines[1:]] == [
        "pgbench: error: could not open file txlog/tx.123: No space left on device",
        "pgbench: fatal: Run was aborted; the above results are incomplete.",
    ]
