"""Analysis never raises on a stored figure, whatever it is (issue 35, item 3).

Runs stored before `import run` checked values may hold a TPS of 1e308 (which made `compare`,
`results show` and `report` end in OverflowError), -500, NaN, infinities, the text "fast".
Here such runs are written with the Store API, as an old import did, and every command that
reads runs is run on them through the CLI: none raises, JSON stays JSON (no NaN, no
Infinity), and each figure set aside is said."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from howfast.analysis.compare import difference
from howfast.analysis.figures import usable_facts, usable_step
from howfast.analysis.stats import describe
from howfast.cli import main
from howfast.exports.restore import restore_run
from howfast.exports.runfile import parse_run_file
from howfast.model import RunRecord, Sample, StepRecord
from howfast.report import figures
from howfast.store import open_store
from tests.unit.stored_runs import fio, init, open_temp_store, pgbench, store_run

BAD_TPS: list[object] = [1e308, -500.0, math.nan, math.inf, "fast", [1.0], True]


def _bad_steps() -> list[StepRecord]:
    steps: list[StepRecord] = [replace(init("/mnt/a", 10.0), metrics={"db_size_bytes": 2**80})]
    for repetition, tps in enumerate(BAD_TPS, start=1):
        step = pgbench("/mnt/a", 1000.0, repetition=repetition, per_second=[1e308, -1.0, 900.0])
        step.metrics.update(tps=tps, latency_p99_ms=-3.0)
        steps.append(step)
    steps.append(pgbench("/mnt/a", 1000.0, clients=-5))
    steps.append(fio("/mnt/a", "rand-read-4k-qd64", read_iops="fast", read_lat_avg_ms=1e308))  # type: ignore[arg-type]
    return steps


def _good_steps() -> list[StepRecord]:
    steps = [init("/mnt/a", 10.0)]
    steps += [pgbench("/mnt/a", t, repetition=r) for r, t in enumerate([1000.0, 1010.0, 990.0], 1)]
    steps.append(fio("/mnt/a", "rand-read-4k-qd64", read_iops=4000.0, read_lat_avg_ms=1.0))
    return steps


@pytest.fixture
def stores(tmp_path: Path) -> tuple[str, int, int]:
    db = open_temp_store(tmp_path)
    good = store_run(db, _good_steps())
    bad = store_run(db, _bad_steps())
    db.close()
    return str(tmp_path / "results.db"), good, bad


def _strict_json(text: str) -> object:
    def refuse(token: str) -> object:
        raise AssertionError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _howfast(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The command's exit status and stdout; a traceback (a bug: main prints it) fails."""
    code = main(args)
    out = capsys.readouterr()
    assert "Traceback" not in out.err, out.err
    return code, out.out + out.err


def test_every_reading_command_reads_bad_figures(
    stores: tuple[str, int, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, good, bad = stores
    at = ["--store", store]
    code, shown = _howfast(["results", "show", str(bad), *at], capsys)
    assert code == 0
    # Each figure set aside is said, with its rule; none is printed as a number.
    assert "stored figure tps: 1e+308 is above 1e+09" in shown
    assert "stored figure tps: -500.0 is negative" in shown
    assert 'stored figure tps: "fast" is not a number' in shown
    assert "stored param clients: -5 is below 1" in shown
    for args in (["--json"], ["--json", "--series"]):
        code, doc = _howfast(["results", "show", str(bad), *at, *args], capsys)
        assert code == 0
        found = _strict_json(doc)
        assert isinstance(found, dict)
        tps = [s["metrics"].get("tps") for s in found["steps"] if s["workload"] == "pgbench"]
        assert tps[: len(BAD_TPS)] == [None] * len(BAD_TPS)
    for pair in ([good, bad], [bad, good]):
        for extra in ([], ["--json"], ["--fail-if", "tps<-5%"]):
            code, compared = _howfast(["compare", *map(str, pair), *at, *extra], capsys)
            # The gate cannot fail a run on figures it set aside: it cannot judge (3).
            assert code == (3 if extra[:1] == ["--fail-if"] else 0), compared
            if extra == ["--json"]:
                _strict_json(compared)
    for suffix in ("html", "md"):
        out = tmp_path / f"report.{suffix}"
        code, _ = _howfast(["report", str(good), str(bad), "-o", str(out), *at], capsys)
        assert code == 0 and out.stat().st_size > 0
    for fmt in ("json", "csv", "ndjson", "prometheus"):
        out = tmp_path / f"export.{fmt}"
        code, said = _howfast(["export", fmt, str(bad), "-o", str(out), *at], capsys)
        assert code == 0, said
        text = out.read_text()
        if fmt == "json":
            _strict_json(text)
        if fmt == "ndjson":
            for line in text.splitlines():
                _strict_json(line)


def test_a_step_keeps_what_its_rules_allow() -> None:
    step = pgbench("/mnt/a", 1000.0, per_second=[1e308, 900.0])
    step.metrics.update(tps=math.inf, knee_how="rate", statements=[{"sql": "x"}], rate_met=True)
    usable = usable_step(step)
    assert usable.metrics["tps"] is None
    # What no rule names is kept as it is: texts, lists, flags.
    assert (usable.metrics["knee_how"], usable.metrics["statements"]) == ("rate", [{"sql": "x"}])
    assert usable.metrics["rate_met"] is True
    assert usable.metrics["latency_avg_ms"] == step.metrics["latency_avg_ms"]
    assert math.isnan(usable.series["tps"][0].value) and usable.series["tps"][1].value == 900.0
    assert usable.series["tps"][0] == Sample(1.0, usable.series["tps"][0].value)
    assert any(w.startswith("series tps: values that are not a rate") for w in usable.warnings)
    sound = pgbench("/mnt/a", 1000.0, per_second=[1000.0])
    assert usable_step(sound) is sound


# -- every number of a real run poisoned ----------------------------------------------------------

RECORDED = Path(__file__).resolve().parents[1] / "data" / "runfiles" / "tpcb-1-client-pg15.json"


def _poisoned(value: Any, bad: object) -> Any:
    """Every number in `value` replaced by `bad` (texts, flags and nulls kept)."""
    if isinstance(value, dict):
        return {k: _poisoned(v, bad) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_poisoned(v, bad) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return bad
    return value


def _poisoned_run(run: RunRecord, bad: object) -> RunRecord:
    number = bad if isinstance(bad, float) else math.nan
    steps = [
        replace(
            s,
            params=_poisoned(s.params, bad),
            resolved=_poisoned(s.resolved, bad),
            metrics=_poisoned(s.metrics, bad),
            sections=_poisoned(s.sections, bad),
            series={n: [Sample(p.t, number) for p in points] for n, points in s.series.items()},
        )
        for s in run.steps
    ]
    targets = [replace(t, device=_poisoned(t.device, bad)) for t in run.targets]
    return replace(run, steps=steps, targets=targets, environment=_poisoned(run.environment, bad))


@pytest.mark.parametrize("bad", [1e308, math.nan, -5, "fast"])
def test_a_real_run_with_every_number_poisoned_is_read(
    bad: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded run file of a real 2 s tpcb-like run (samplers' sections, series,
    histograms) is stored as it is, and again with every number replaced by `bad`, as an
    old import could have: every reading command reads both, saying what it left out."""
    (exported,) = parse_run_file(RECORDED.read_text(), RECORDED.name)
    store = tmp_path / "results.db"
    db = open_store(str(store))
    try:
        sound = restore_run(db, exported)
        poisoned = restore_run(db, replace(exported, run=_poisoned_run(exported.run, bad)))
    finally:
        db.close()
    at = ["--store", str(store)]
    code, shown = _howfast(["results", "show", str(poisoned), *at], capsys)
    assert code == 0
    stored_as_null = isinstance(bad, float) and math.isnan(bad)  # the store writes NaN as null
    assert stored_as_null or "not used (shown as —)" in shown
    code, doc = _howfast(["results", "show", str(poisoned), "--json", "--series", *at], capsys)
    assert code == 0
    _strict_json(doc)
    for pair in ([sound, poisoned], [poisoned, sound]):
        code, compared = _howfast(["compare", *map(str, pair), "--fail-if", "tps<-5%", *at], capsys)
        assert code == 3, compared  # one repetition, and a TPS set aside: cannot judge
    out = tmp_path / "report.md"
    code, _ = _howfast(["report", str(sound), str(poisoned), "-o", str(out), *at], capsys)
    assert code == 0 and out.stat().st_size > 0
    for fmt in ("csv", "ndjson", "prometheus"):
        code, said = _howfast(
            ["export", fmt, str(poisoned), "-o", str(tmp_path / fmt), *at], capsys
        )
        assert code == 0, said


def test_a_baseline_of_almost_nothing_gives_no_endless_ratio() -> None:
    """Figures within their rules can still divide into infinity (a TPS of 5e-324 against
    10^9): no ratio rather than 'inf' (or `Infinity` in JSON, which is not JSON), and a
    large finite ratio in three digits, not three hundred."""
    tiny, large = describe([5e-324]), describe([1e9])
    assert difference(tiny, large, True).ratio is None
    assert difference(describe([1e-300]), large, True).ratio is None  # 1e309: past a float
    assert difference(describe([1e-3]), large, True).statement.startswith(
        "the other run is 1e+12x the baseline"
    )
    assert figures.ratio(math.inf) == figures.DASH and figures.ratio(2.5e9) == "2.5e+09×"
    assert figures.ratio(1.32) == "1.320×"
    assert figures.number(math.inf, "tps") == figures.number(math.nan, "tps") == figures.DASH


def test_facts_keep_what_their_rules_allow() -> None:
    facts = {
        "memory_bytes": 1e308,  # printed with its 309 digits before
        "cpu_count": 8,
        "uptime_s": -5,
        "data": {"size_bytes": 1.0e10, "limit": "max", "rotational": False, "x": [math.inf, 2]},
    }
    assert usable_facts(facts) == {
        "memory_bytes": None,
        "cpu_count": 8,
        "uptime_s": None,
        "data": {"size_bytes": 1.0e10, "limit": "max", "rotational": False, "x": [None, 2]},
    }
