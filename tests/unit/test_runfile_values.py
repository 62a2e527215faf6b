"""`import run` holds a run file's values to the rules the tools' parsers apply (issue 35):
every figure finite and within its bounds (metric.py), dates as dates, no deeper or larger
than a run file can be; the first bad value refuses the whole file, by its JSON path, and
nothing is stored. Every text a run file brings in has its passwords masked."""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from howfast.cli import main
from howfast.errors import UsageError
from howfast.exports import runcheck
from howfast.exports.runfile import export_document, parse_run_file
from howfast.metric import METRIC_UNITS_BOUNDS, bounds_for
from howfast.plugin.registry import plugins
from howfast.store import open_store
from tests.unit import goldens
from tests.unit.test_exports import AT, bad_file

DATA = Path(__file__).resolve().parents[1] / "data"


def _file(change: Any = None, **changes: object) -> str:
    """bad_file's minimal run file, with a pgbench step whose figures are sound, changed by
    `change(document)`."""
    document = json.loads(bad_file(**changes))
    step = document["runs"][0]["steps"][0]
    step["metrics"] = {"tps": 1000.0, "latency_avg_ms": 4.0, "transactions": 60000}
    step["asked"] = {"mode": "tpcb-like", "clients": 4, "duration_s": 60, "scale": 10}
    step["series"] = {"tps": [[1.0, 990.0], [2.0, None]], "io.data.write_iops": [[1.0, 30.5]]}
    step["histograms"] = {"latency_us": {"250": 10}}
    if change is not None:
        change(document)
    return json.dumps(document)


def _set(path: str, value: object) -> Any:
    """A change that sets the value at a path of runs[0].steps[0] ('metrics.tps'): its
    first part, then the rest as one key ('series', 'io.data.write_iops')."""

    def change(document: dict[str, Any]) -> None:
        node = document["runs"][0]["steps"][0]
        *parents, key = path.split(".", 1)
        for part in parents:
            node = node[part]
        node[key] = value

    return change


def test_a_sound_file_parses() -> None:
    (found,) = parse_run_file(_file(), "f.json")
    assert found.run.steps[0].metrics["tps"] == 1000.0


STEP = "f.json: runs[0].steps[0]"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_set("metrics.tps", -500), f"{STEP}.metrics.tps: -500 is negative"),
        (_set("metrics.tps", 1e308), f"{STEP}.metrics.tps: 1e+308 is above 1e+09"),
        (_set("metrics.tps", "fast"), f'{STEP}.metrics.tps: "fast" is not a number'),
        (_set("metrics.tps", True), f"{STEP}.metrics.tps: true is not a number"),
        (_set("metrics.latency_p99_ms", -3), f"{STEP}.metrics.latency_p99_ms: -3 is negative"),
        (_set("metrics.transactions", 2.5), f"{STEP}.metrics.transactions: 2.5 is not a whole"),
        (_set("asked.clients", -5), f"{STEP}.asked.clients: -5 is below 1"),
        (_set("asked.clients", "many"), f'{STEP}.asked.clients: "many" is not a number'),
        (_set("resolved.size_bytes", 2**64), f"{STEP}.resolved.size_bytes: {2**64} is above"),
        (_set("series.tps", [[1.0, -1.0]]), f"{STEP}.series.tps[0][1]: -1.0 is negative"),
        (_set("series.tps", [[1e300, 1.0]]), f"{STEP}.series.tps[0][0]: 1e+300 is above"),
        (
            _set("series.io.data.write_iops", [[1.0, 2e9]]),
            f'{STEP}.series["io.data.write_iops"][0][1]: 2000000000.0 is above 1e+09',
        ),
        (
            _set("histograms.latency_us", {"-5": 1}),
            f'{STEP}.histograms.latency_us key "-5": -5 is negative',
        ),
        (_set("histograms.latency_us", {"5": -1}), f'{STEP}.histograms.latency_us["5"]: -1 is'),
        (_set("started_at", "yesterday"), f'{STEP}.started_at: "yesterday" is not an ISO 8601'),
        (_set("sections", {"cpu": {"user_pct": 1e300}}), f"{STEP}.sections.cpu.user_pct: 1e+300"),
    ],
)
def test_a_bad_value_is_refused_by_its_path(change: Any, said: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_run_file(_file(change), "f.json")
    assert str(refused.value).startswith(said), str(refused.value)
    assert "the run file is refused, nothing stored" in str(refused.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (_file().replace("1000.0", "NaN"), "metrics.tps: NaN is not a finite number"),
        (_file().replace("1000.0", "Infinity"), "metrics.tps: Infinity is not a finite number"),
        (_file().replace("1000.0", "1e400"), "metrics.tps: Infinity is not a finite number"),
        (_file().replace("1000.0", "-Infinity"), "metrics.tps: -Infinity is not a finite"),
        (_file(runs__started_at=""), 'f.json: runs[0].started_at: "" is not an ISO 8601'),
        (_file(exported_at="2026-13-45"), 'f.json: exported_at: "2026-13-45" is not an ISO'),
        (_file().replace("60000", "1" * 5000), "f.json: a number of thousands of digits"),
        (_file().replace("60000", str(2**70)), f"metrics.transactions: {2**70} is above"),
    ],
)
def test_json_that_python_reads_but_no_figure_can_be(text: str, said: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_run_file(text, "f.json")
    assert said in str(refused.value)


def test_a_file_nested_deeper_than_a_run_file_is_refused_before_recursion() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    for text in (deep, _file().replace('"environment": {}', f'"environment": {{"x": {deep}}}')):
        with pytest.raises(UsageError, match="nested deeper than a run file can be"):
            parse_run_file(text, "f.json")
    nested: Any = 1
    for _ in range(runcheck.MAX_DEPTH):
        nested = [nested]
    text = _file(lambda d: d["runs"][0]["environment"].update(x=nested))
    with pytest.raises(UsageError) as refused:
        parse_run_file(text, "f.json")
    assert str(refused.value).startswith("f.json: runs[0].environment.x[0][0]: nested deeper than")


def test_a_file_larger_than_a_run_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _file()
    monkeypatch.setattr(runcheck, "MAX_CHARS", len(text) - 1)
    with pytest.raises(UsageError, match="more than a run file may hold"):
        parse_run_file(text, "f.json")


def test_a_bad_value_in_any_run_stores_nothing(tmp_path: Path, capsys) -> None:
    """Two runs, the second with one bad figure: the first is not stored either."""
    document = json.loads(_file())
    second = copy.deepcopy(document["runs"][0])
    second["steps"][0]["metrics"]["tps"] = -500
    document["runs"].append(second)
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(document))
    store = str(tmp_path / "results.db")
    assert main(["import", "run", str(path), "--store", store]) == 2
    err = capsys.readouterr().err
    assert "runs[1].steps[0].metrics.tps: -500 is negative" in err and "Traceback" not in err
    db = open_store(store)
    try:
        assert db.list_runs() == []
    finally:
        db.close()


def test_every_declared_metric_has_the_rule_of_its_unit() -> None:
    """The rules go by names; each workload's declared metrics agree with them."""
    for plugin in plugins().values():
        for metric in plugin.metrics:
            assert bounds_for(metric.name) is METRIC_UNITS_BOUNDS[metric.unit], metric


@pytest.mark.parametrize("case", sorted(goldens.CASES))
def test_runs_howfast_stores_pass_its_own_rules(case: str, tmp_path: Path) -> None:
    """No false refusal: every fixture run (imports of recorded pgbench and fio outputs
    among them) exported as a run file is read back whole."""
    db = open_store(str(tmp_path / "results.db"))
    try:
        run = db.get_run(goldens.CASES[case](db), with_series=True)
    finally:
        db.close()
    assert run is not None
    document = export_document([run], source_store="s", exported_at=AT, howfast_version="0")
    (found,) = parse_run_file(json.dumps(document), "f.json")
    assert len(found.run.steps) == len(run.steps)


# -- secrets --------------------------------------------------------------------------------------

PLANTED = {
    "target": "postgresql://bench:pw-target-1@db.example/bench",
    "location": "postgresql://bench:pw-location-2@db.example/bench",
    "source": "postgresql://howfast:pw-source-3@store.example/howfast",
    "label": "nvme host=db password=pw-label-4",
    "plan": "mine password=pw-plan-5",
    "setting": "host=primary password=pw-setting-6",
    "error": "could not connect to postgresql://bench:pw-error-7@db.example/bench",
    "warning": "retried postgresql://bench:pw-warning-8@db.example/bench",
    "event": "1s:exec=psql postgresql://bench:pw-event-9@db.example/bench",
    "environment": "PGPASSWORD=pw-environment-10",
    "param": "--dsn=postgresql://bench:pw-param-11@db.example/bench",
    "device": "cifs://bench:pw-device-12@nas.example/share",
    "standby": "postgresql://bench:pw-standby-13@standby.example/bench",
}
PASSWORDS = [text.split("pw-", 1)[1] for text in PLANTED.values()]


def _secret_file() -> str:
    document = json.loads(_file())
    document["source"]["store"] = PLANTED["source"]
    run = document["runs"][0]
    run["plan"], run["label"] = PLANTED["plan"], PLANTED["label"]
    run["environment"] = {"shell": PLANTED["environment"]}
    target = run["targets"][0]
    target.update(name=PLANTED["target"], location=PLANTED["location"])
    target["settings"] = {"primary_conninfo": PLANTED["setting"]}
    target["device"] = {"data": {"source": PLANTED["device"]}}
    target["standbys"] = [{"name": "standby1", "location": PLANTED["standby"]}]
    failed = copy.deepcopy(run["steps"][0])
    failed.update(status="failed", error=PLANTED["error"], id="4")
    step = run["steps"][0]
    step["warnings"] = [PLANTED["warning"]]
    step["asked"]["extra_args"] = [PLANTED["param"]]
    events = json.loads((DATA / "events" / "restart-failover-pg15.json").read_text())["marks"]
    events["marks"][0]["text"] = PLANTED["event"]
    step["sections"] = {"events": events}
    for each in (step, failed):
        each["target"] = PLANTED["target"]
    run["steps"].append(failed)
    return json.dumps(document)


def test_no_planted_password_reaches_an_output_or_the_store(tmp_path: Path, capsys) -> None:
    path = tmp_path / "secrets.json"
    path.write_text(_secret_file())
    store = tmp_path / "results.db"
    at = ["--store", str(store)]
    outputs = []

    def howfast(*args: str) -> None:
        code = main([*args, *at])
        out = capsys.readouterr()
        assert code == 0 and "Traceback" not in out.err, out.err
        outputs.append(out.out + out.err)

    howfast("import", "run", str(path))
    assert "***" in outputs[0]  # stored, with its passwords masked
    howfast("results", "show", "1")
    howfast("results", "show", "1", "--json")
    howfast("results", "show", "1", "--json", "--series")
    howfast("results", "list")
    for fmt in ("json", "csv", "ndjson", "prometheus"):
        out = tmp_path / f"export.{fmt}"
        howfast("export", fmt, "1", "-o", str(out))
        outputs.append(out.read_text())
    for suffix in ("html", "md"):
        out = tmp_path / f"report.{suffix}"
        howfast("report", "1", "-o", str(out))
        outputs.append(out.read_text())
    with sqlite3.connect(store) as db:  # the store's pages written out, not a WAL pending
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("results.db*"))
    for password in PASSWORDS:
        assert password.encode() not in stored, password
        for text in outputs:
            assert password not in text, password


# -- tool outputs: the same rules for the figures their parsers read ------------------------------


@pytest.mark.parametrize(
    ("kind", "name", "edit", "said"),
    [
        (
            "pgbench",
            "run-tpcb-pg15.txt",
            lambda text: text.replace("tps = 2177.857349", f"tps = {'9' * 400}.0"),
            "step 1 (pgbench) metrics.tps: Infinity is not a finite number",
        ),
        (
            "pgbench",
            "run-tpcb-pg15.txt",
            lambda text: text.replace("latency average = 1.815", "latency average = 9999999999"),
            "step 1 (pgbench) metrics.latency_avg_ms: 9999999999.0 is above 6.048e+08",
        ),
        (
            "fio",
            "fio-3.33_randrw-4k-qd1.json",
            lambda text: _fio_direction(text, {"iops": "fast"}),
            "jobs[1].read.total_ios is missing, not a figure fio can have measured",
        ),
    ],
)
def test_an_output_with_a_figure_no_tool_prints_stores_nothing(
    kind: str, name: str, edit: Any, said: str, tmp_path: Path, capsys
) -> None:
    path = tmp_path / name
    path.write_text(edit((DATA / kind / name).read_text()))
    store = str(tmp_path / "results.db")
    assert main(["import", kind, str(path), "--store", store]) == 2
    err = capsys.readouterr().err
    assert said in err and "nothing stored" in err and "Traceback" not in err, err
    db = open_store(store)
    try:
        assert db.list_runs() == []
    finally:
        db.close()


def _fio_direction(text: str, section: dict[str, Any]) -> str:
    document = json.loads(text)
    document["jobs"][1]["read"] = section
    return json.dumps(document)


def test_a_real_run_file_passes_its_rules() -> None:
    """A run file of a real run (tests/data/runfiles/README.md) holds the samplers' sections
    and series: none of its values is refused."""
    path = DATA / "runfiles" / "tpcb-1-client-pg15.json"
    (found,) = parse_run_file(path.read_text(), path.name)
    assert [s.workload for s in found.run.steps] == ["pgbench-init", "pgbench"]
    assert found.run.steps[1].sections["io"] and found.run.steps[1].series["tps"]


def test_import_run_reads_no_further_than_a_run_file_can_be(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.json"
    path.write_text(_file() + " " * 2000)
    monkeypatch.setattr(runcheck, "MAX_CHARS", 1000)
    assert main(["import", "run", str(path), "--store", str(tmp_path / "results.db")]) == 2
    err = capsys.readouterr().err
    assert "big.json: more than a run file may hold (1,000 characters), nothing stored" in err


def test_depth_is_counted_on_brackets_outside_strings() -> None:
    assert runcheck.text_depth('{"a": [[1, 2], [3]], "b": "[[[[ \\" {{{{"}') == 3
    assert runcheck.text_depth("[" * 100 + "]" * 100) == 100
    assert runcheck.text_depth("1") == 0
    document = json.loads(_file())
    assert runcheck.text_depth(json.dumps(document)) == _depth(document)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def test_import_pgbench_masks_a_password_in_its_label(tmp_path: Path) -> None:
    """`import pgbench --label` is the user's text: a URI with a password pasted into it is
    stored, listed and shown without the password."""
    from howfast.cli import main

    secret = "Lbl-s3cret-77"
    store = tmp_path / "results.db"
    text = (DATA / "pgbench" / "run-tpcb-pg15.txt").read_text()
    source = tmp_path / "out.txt"
    source.write_text(text)
    label = f"postgresql://bench:{secret}@db.example/bench"
    assert main(["import", "pgbench", str(source), "--label", label, "--store", str(store)]) == 0
    assert secret.encode() not in store.read_bytes()
