"""Run files (`export json`, `import run`), flat rows (`export csv|ndjson`) and their atomic
writing, on runs written with the Store API into real SQLite stores. Real runs travel in
tests/integration/test_travel_and_gate.py."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from howfast.analysis.derive import derive_run
from howfast.errors import UsageError
from howfast.exports.output import write_output
from howfast.exports.restore import restore_run, with_provenance
from howfast.exports.rows import COLUMNS, csv_chunks, ndjson_chunks, run_rows, unit_of
from howfast.exports.runfile import FORMAT, export_document, parse_run_file
from howfast.model import RunRecord, Sample, StepRecord
from howfast.outfile import output_file
from howfast.service.reading import run_document
from howfast.store import SqlStore, open_store
from tests.unit.stored_runs import fio, init, pgbench, store_run

EXPORTED_AT = "2026-02-01T08:00:00.000+00:00"
AT = "2026-02-01T07:00:00.000+00:00"  # when the steps of bad_file ran


@pytest.fixture
def source(tmp_path: Path):
    store = open_store(str(tmp_path / "source.db"))
    yield store
    store.close()


@pytest.fixture
def other(tmp_path: Path):
    store = open_store(str(tmp_path / "other.db"))
    yield store
    store.close()


def rich_run(db: SqlStore) -> RunRecord:
    """A run with what a run file must carry: asked and resolved params, sections, series
    with a missing value, histograms, a warm-up, a failed step, a step stored by an old
    howfast (legacy), a fio step with a boolean and a list among its metrics."""
    tps = [1000.0, 1010.0, float("nan"), 990.0]
    measured = replace(
        pgbench("/mnt/a", 1000.0, per_second=tps, repetition=2),
        resolved={"jobs": 4, "log_sampling_rate": 0.5},
        sections={"cpu": {"user_pct": 12.5}, "postgres": {"wal_bytes": 1 << 20}},
        histograms={"latency_us": {250: 10, 4000: 3}},
    )
    legacy = replace(pgbench("/mnt/a", 990.0, clients=8), legacy=True)
    failed = replace(pgbench("/mnt/a", 1.0, clients=16), status="failed", error="boom")
    probe = fio("/mnt/a", "wal-sync", write_iops=800.0, sync_lat_avg_ms=1.2)
    probe.metrics.update({"direct_io_refused": False, "statements": [{"sql": "x"}]})
    steps = [
        init("/mnt/a", 10.0),
        pgbench("/mnt/a", 500.0, warmup=True),
        measured,
        legacy,
        failed,
        probe,
    ]
    run = db.get_run(store_run(db, steps, label="nvme, 3 replicas"), with_series=True)
    assert run is not None
    return run


def shown(run: RunRecord) -> dict:
    """The run document `results show --json --series` prints, without what a copy changes:
    ids and the provenance in its environment."""
    # A copy, as JSON has it (NaN, tuples): the document shares the run's dictionaries.
    doc = json.loads(json.dumps(run_document(derive_run(run), with_series=True)))
    doc.pop("id")
    doc["environment"].pop("provenance", None)
    for step in doc["steps"]:
        step.pop("id")
    return doc


def file_text(runs: list[RunRecord], store: str = "/data/source.db") -> str:
    document = export_document(
        runs, source_store=store, exported_at=EXPORTED_AT, howfast_version="0.1.0"
    )
    return json.dumps(document)


# -- run files ------------------------------------------------------------------------------------


def test_a_run_file_round_trips_what_was_stored(source: SqlStore) -> None:
    run = rich_run(source)
    (back,) = parse_run_file(file_text([run]), "run.json")
    original, copy = replace(run, steps=[]), replace(back.run, steps=[])
    assert copy == original
    assert len(back.run.steps) == len(run.steps)
    for before, after in zip(run.steps, back.run.steps, strict=True):
        assert after.id is None
        assert (after.params, after.resolved, after.legacy) == (
            before.params,
            before.resolved,
            before.legacy,
        )
        assert after.histograms == before.histograms
        for name, points in before.series.items():  # NaN != NaN: compared as text
            assert repr(after.series[name]) == repr(points)
        after_rest = replace(after, id=before.id, series={}, histograms={})
        assert after_rest == replace(before, series={}, histograms={})
    assert back.provenance.source_run_id == str(run.id)
    assert back.provenance.source_store == "/data/source.db"


def test_imported_runs_show_the_same_figures_and_verdicts(
    source: SqlStore, other: SqlStore
) -> None:
    run = rich_run(source)
    other.create_run("other", {}, EXPORTED_AT)  # ids differ between the stores
    (exported,) = parse_run_file(file_text([run]), "run.json")
    new_id = restore_run(other, exported, now=lambda: "2026-02-02T09:00:00.000+00:00")
    assert new_id != run.id
    copy = other.get_run(new_id, with_series=True)
    assert copy is not None
    assert shown(copy) == shown(run)
    assert copy.status == "completed" and copy.label == "nvme, 3 replicas"
    assert copy.environment["provenance"] == [
        {
            "source_store": "/data/source.db",
            "source_run_id": str(run.id),
            "exported_at": EXPORTED_AT,
            "exported_by": "howfast 0.1.0",
            "file": "run.json",
            "imported_at": "2026-02-02T09:00:00.000+00:00",
        }
    ]
    # A step stored by an old howfast stays one: its frozen figures still give way when read.
    assert [s.legacy for s in copy.steps] == [s.legacy for s in run.steps]
    assert any(s.legacy for s in copy.steps)


def test_a_second_hop_keeps_the_first(source: SqlStore, other: SqlStore) -> None:
    hop = {"source_run_id": "2"}
    env = with_provenance({"kernel": "6.1", "provenance": [{"source_run_id": "1"}]}, hop)
    assert env == {"kernel": "6.1", "provenance": [{"source_run_id": "1"}, hop]}


def test_several_runs_in_one_file(source: SqlStore, other: SqlStore) -> None:
    first = rich_run(source)
    second = source.get_run(store_run(source, [init("/mnt/b", 3.0)], targets=["/mnt/b"]))
    assert second is not None
    found = parse_run_file(file_text([first, second]), "runs.json")
    assert [e.provenance.source_run_id for e in found] == [str(first.id), str(second.id)]
    ids = [restore_run(other, e) for e in found]
    assert [r.id for r in other.list_runs()] == ids[::-1]


def test_a_running_run_is_not_exported(source: SqlStore) -> None:
    run_id = source.create_run("quick", {}, EXPORTED_AT)
    run = source.get_run(run_id)
    assert run is not None
    with pytest.raises(UsageError, match=f"run {run_id} is running: export it once it has ended"):
        export_document([run], source_store="s", exported_at=EXPORTED_AT, howfast_version="0")


def test_an_interrupted_import_leaves_no_partial_copy(
    source: SqlStore, other: SqlStore, monkeypatch
) -> None:
    (exported,) = parse_run_file(file_text([rich_run(source)]), "run.json")
    calls = []

    def interrupted(run_id: int, step: StepRecord) -> int:
        calls.append(step)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return SqlStore.add_step(other, run_id, step)

    monkeypatch.setattr(other, "add_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        restore_run(other, exported)
    assert other.list_runs() == []


def bad_file(**changes: object) -> str:
    step = {
        "id": "3", "target": "/a", "workload": "pgbench", "asked": {}, "resolved": {},
        "status": "completed", "error": None, "started_at": AT, "finished_at": AT,
        "metrics": {"tps": 1.0}, "warnings": [], "sections": {}, "series": {},
        "histograms": {}, "legacy": False,
    }  # fmt: skip
    run = {
        "id": "7", "plan": "quick", "label": None, "status": "completed", "started_at": AT,
        "finished_at": AT, "environment": {},
        "targets": [{"name": "/a", "kind": "local", "location": "/a", "pg_version": "16",
                     "settings": {}, "device": {}}],
        "steps": [step],
    }  # fmt: skip
    document = {
        "format": FORMAT, "version": 1, "exported_at": AT, "howfast_version": "0.1.0",
        "source": {"store": "s"}, "runs": [run],
    }  # fmt: skip
    for where, value in changes.items():
        *path, key = where.split("__")
        node: dict = document
        for part in path:
            node = node[part][0] if part in ("runs", "steps", "targets") else node[part]
        if value is None:
            del node[key]
        else:
            node[key] = value
    return json.dumps(document)


def test_a_good_minimal_file_parses() -> None:
    (found,) = parse_run_file(bad_file(), "f.json")
    assert found.run.steps[0].metrics == {"tps": 1.0}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{", "f.json: not JSON (Expecting property name"),
        ("[]", 'f.json: not a howfast run file (no "format": "howfast-runs")'),
        ('{"tps": 1}', "not a howfast run file"),
        (bad_file(version=2), "f.json: run file version 2, this howfast reads version 1"),
        (bad_file(runs__steps__status="done"), "f.json: runs[0].steps[0].status: Input should"),
        (bad_file(runs__steps__metrics=None), "f.json: runs[0].steps[0].metrics: Field required"),
        (bad_file(runs__steps__series={"tps": [[1, "x"]]}), "runs[0].steps[0].series.tps[0][1]"),
        (bad_file(runs__status="running"), "runs[0].status: Input should be 'completed'"),
        (bad_file(runs__steps__oops=1), "runs[0].steps[0].oops: Extra inputs are not permitted"),
        (bad_file(runs=[]), "f.json: the run file holds no run"),
        (bad_file(runs__steps__target="/b"), "runs[0].steps[0].target: '/b' is not one of the"),
        (
            bad_file(runs__steps__histograms={"latency_us": {"x": 1}}),
            "runs[0].steps[0].histograms.latency_us: 'x' is not an integer value",
        ),
    ],
)
def test_bad_run_files_say_where_and_what(text: str, said: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_run_file(text, "f.json")
    assert said in str(raised.value)


# -- rows -----------------------------------------------------------------------------------------


def test_rows_one_per_step_and_numeric_figure(source: SqlStore) -> None:
    run = derive_run(rich_run(source))
    rows = list(run_rows([run]))
    assert all(list(row) == list(COLUMNS) for row in rows)
    steps = {row["step"] for row in rows}
    warmup = next(s for s in run.steps if s.params.get("warmup"))
    assert str(warmup.id) not in steps  # left out, as from every figure
    assert len(steps) == len(run.steps) - 1
    tps = [r for r in rows if r["metric"] == "tps" and r["status"] == "completed"]
    assert [(r["mode"], r["clients"], r["repetition"], r["value"]) for r in tps] == [
        ("tpcb-like", 4, 2, 1000.0),
        ("tpcb-like", 8, 1, 990.0),
    ]
    assert {r["unit"] for r in tps} == {"tx/s"}
    assert tps[0]["run"] == str(run.id) and tps[0]["kind"] == "local"
    assert tps[0]["target"] == "/mnt/a" and tps[0]["workload"] == "pgbench"
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and {r["clients"] for r in failed} == {16}
    probe = {r["metric"]: r for r in rows if r["workload"] == "fio"}
    assert probe["write_iops"]["mode"] == "wal-sync"  # fio: the profile
    assert probe["direct_io_refused"]["value"] == 0  # a boolean as 0/1
    assert "statements" not in probe  # a list is not a figure
    init_rows = [r for r in rows if r["workload"] == "pgbench-init"]
    assert {r["mode"] for r in init_rows} == {None}
    assert {r["metric"]: r["unit"] for r in init_rows}["db_size_bytes"] == "bytes"


def test_series_rows_follow_each_steps_figures(source: SqlStore) -> None:
    run = derive_run(rich_run(source))
    rows = list(run_rows([run], series=True))
    samples = [r for r in rows if r["t_s"] is not None]
    measured = next(s for s in run.steps if s.params.get("repetition") == 2)
    expected = sum(
        1 for points in measured.series.values() for p in points if not math.isnan(p.value)
    )
    assert len(samples) == expected  # the missing value is left out
    tps = [(r["t_s"], r["value"]) for r in samples if r["metric"] == "tps"]
    assert tps == [(1.0, 1000.0), (2.0, 1010.0), (4.0, 990.0)]
    assert {r["unit"] for r in samples if r["metric"] == "latency_ms"} == {"ms"}
    figures = [r for r in rows if r["t_s"] is None]
    assert len(figures) == len(list(run_rows([run])))


@pytest.mark.parametrize(
    ("name", "unit"),
    [
        ("tps", "tx/s"),
        ("latency_p99_ms", "ms"),
        ("read_iops", "IOPS"),
        ("io.data.write_mbps", "MB/s"),
        ("io_data_write_iops", "IOPS"),
        ("cpu.user_pct", "%"),
        ("pg.commits_per_s", "/s"),
        ("mem.dirty_bytes", "bytes"),
        ("io.data.avg_write_kib", "KiB"),
        ("log_tps", "tx/s"),
        ("wal_records", ""),
    ],
)
def test_units_from_the_catalogue_then_the_name(name: str, unit: str) -> None:
    assert unit_of(name) == unit


def test_csv_and_ndjson_text() -> None:
    step = StepRecord(
        target='/mnt/a,"b"', workload="pgbench", params={"mode": "select-only", "clients": 2},
        status="completed", started_at="t", finished_at="t", metrics={"tps": 12.5}, id=9,
        series={"tps": [Sample(1.0, 12.0)]},
    )  # fmt: skip
    run = RunRecord(1, "quick", "completed", "t", "t", {}, [], [step])
    text = "".join(csv_chunks(run_rows([run]), series=False))
    parsed = list(csv.reader(io.StringIO(text)))
    assert parsed[0] == list(COLUMNS)
    assert parsed[1] == [
        "1", '/mnt/a,"b"', "", "pgbench", "select-only", "2", "1", "tps", "12.5", "tx/s", "9",
        "completed",
    ]  # fmt: skip
    lines = "".join(ndjson_chunks(run_rows([run], series=True), series=True)).splitlines()
    assert [json.loads(line)["t_s"] for line in lines] == [None, 1.0]
    assert list(json.loads(lines[0])) == [*COLUMNS, "t_s"]


# -- writing --------------------------------------------------------------------------------------


def test_a_failed_export_leaves_the_previous_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("previous\n")

    def chunks():
        yield "half"
        raise RuntimeError("the store went away")

    with pytest.raises(RuntimeError):
        write_output(output_file(str(path)), chunks(), io.StringIO())
    assert path.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]
    write_output(output_file(str(path)), ["a\n", "b\n"], io.StringIO())
    assert path.read_text() == "a\nb\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]


def test_unwritable_places_are_usage_errors(tmp_path: Path) -> None:
    # More of the rule (special files, links, modes, names) in test_output_files.py.
    with pytest.raises(UsageError, match="is a directory"):
        output_file(str(tmp_path))
    with pytest.raises(UsageError, match="missing does not exist"):
        output_file(str(tmp_path / "missing" / "runs.csv"))


def test_dash_and_no_output_write_stdout() -> None:
    out = io.StringIO()  # '-' and no -o both reach it as None (cli/options.py output_value)
    assert write_output(None, ["a", "b"], out) is None
    assert out.getvalue() == "ab"
