"""Trials read back (analysis/trials.py, slo.py, report/trials_view.py): the per-trial figures,
the probability of loss with its Wilson interval, outage percentiles, the SLO verdict and the
comparison of two designs, on two real runs (tests/data/runfiles/README.md): a failover at 4 s
repeated 5 times with one asynchronous standby 2 ms slower, and 4 times with a synchronous one."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rich.console import Console

from howfast.analysis.compare import compare_runs
from howfast.analysis.trials import (
    nearest_rank,
    run_trials,
    stored_slo,
    wilson_interval,
    with_slo,
)
from howfast.analysis.trials_compare import compare_loss
from howfast.cli import main
from howfast.errors import UsageError
from howfast.exports.runfile import parse_run_file
from howfast.model import RunRecord
from howfast.report import trials_view
from howfast.service.reading import run_document
from howfast.slo import FailureSlo, parse_failure_slo, split_slo
from howfast.store import open_store

RECORDED = Path(__file__).resolve().parents[1] / "data" / "runfiles" / "failover-trials-pg15.json"


@pytest.fixture(scope="module")
def runs() -> tuple[RunRecord, RunRecord]:
    found = [e.run for e in parse_run_file(RECORDED.read_text(), RECORDED.name)]
    assert [r.label for r in found] == ["async-2ms", "sync-on"]
    return found[0], found[1]


# --- the objectives' vocabulary ----------------------------------------------------------------


def test_failure_objectives_parse_to_seconds_and_commits() -> None:
    assert parse_failure_slo("rto=10s,rpo=0") == FailureSlo(10.0, 0)
    assert parse_failure_slo("RPO=5") == FailureSlo(None, 5)
    assert parse_failure_slo("rto=500ms") == FailureSlo(0.5, None)
    assert parse_failure_slo("rto=1.5s, rpo=2").text == "rto=1500ms,rpo=2"
    assert parse_failure_slo("rto=2m").text == "rto=120s"


def test_run_slo_splits_into_the_latency_objective_and_the_failure_ones() -> None:
    assert split_slo("p99=10ms") == ("p99=10ms", None)
    assert split_slo("p99=10ms,rto=5s,rpo=0") == ("p99=10ms", FailureSlo(5.0, 0))
    assert split_slo("rto=5s") == (None, FailureSlo(5.0, None))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("foo=1", 'unknown key "foo"'),
        ("rto=fast", "rto=fast: rto is the longest outage allowed, a duration"),
        ("rto=-1s", "rto=-1s: rto must not be negative"),
        ("rpo=-2", "rpo=-2: rpo must not be negative"),
        ("rpo=1s", "rpo=1s: rpo counts acknowledged commits lost per trial"),
        ("rto=1s,rto=2s", "rto is given twice"),
        ("rto", '"rto" is not KEY=VALUE'),
        (" , ", "--slo: empty"),
        ("p99=10ms", "p99=10ms is a latency objective, given to `howfast run --slo`"),
    ],
)
def test_a_bad_objective_is_refused_naming_its_key(text: str, said: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_failure_slo(text)
    assert said in str(raised.value)


def test_results_show_refuses_a_bad_slo_before_reading_the_store(tmp_path: Path, capsys) -> None:
    store = tmp_path / "never.db"
    assert main(["results", "show", "1", "--store", str(store), "--slo", "rto=soon"]) == 2
    assert "--slo rto=soon: rto is the longest outage allowed" in capsys.readouterr().err
    assert not store.exists()


# --- the statistics ----------------------------------------------------------------------------


def test_nearest_rank_is_an_observed_value_and_the_max_below_20_values() -> None:
    five = [0.3, 0.35, 4.58, 0.35, 4.53]
    assert nearest_rank(five, 50) == 0.35
    assert nearest_rank(five, 95) == 4.58  # ceil(0.95 * 5) = 5: the max
    twenty = [float(i) for i in range(1, 21)]
    assert nearest_rank(twenty, 95) == 19.0  # from 20 values on, below the max
    assert nearest_rank([], 50) is None


def test_wilson_interval_matches_the_textbook_values() -> None:
    # Wilson (1927) score interval at 95%: 4/10 -> 0.168-0.687; 0/20 -> 0-0.161
    low, high = wilson_interval(4, 10) or (0, 0)
    assert (round(low, 3), round(high, 3)) == (0.168, 0.687)
    low, high = wilson_interval(0, 20) or (1, 1)
    assert low == pytest.approx(0.0, abs=1e-12) and round(high, 3) == 0.161
    assert wilson_interval(0, 0) is None


# --- a run's trials ----------------------------------------------------------------------------


def test_each_repetition_of_an_event_step_is_a_trial_with_its_figures(runs) -> None:
    (found,) = run_trials(runs[0])
    assert [t.number for t in found.trials] == [1, 2, 3, 4, 5]
    assert [t.lost for t in found.trials] == [1, 0, 1, 0, 1]
    assert [t.lost_max for t in found.trials] == [1, 1, 1, 1, 1]
    assert [t.in_doubt for t in found.trials] == [0, 1, 0, 1, 0]
    # the standby's lag just before the kill, from the failover's facts
    assert [t.standby_lag_bytes for t in found.trials] == [7744, 320, 528, 584, 392]
    assert [t.down_to_end for t in found.trials] == [False, False, True, False, True]
    assert [t.recovery_s is None for t in found.trials] == [True, False, True, False, True]
    assert found.asked is None  # --repeat: no `trials` param


def test_the_summary_a_decision_needs(runs) -> None:
    (found,) = run_trials(runs[0])
    assert (found.with_loss, len(found.counted), found.with_possible_loss) == (3, 5, 5)
    doc = found.document()
    assert doc["p_loss"] == 0.6 and doc["p_loss_ci95"] == [0.2307, 0.8824]
    assert doc["lost_commits_median"] == 1 and doc["lost_commits_max"] == 1
    assert doc["in_doubt_total"] == 2
    assert doc["downtime_p50_s"] == 0.352 and doc["downtime_p95_s"] == doc["downtime_max_s"]
    assert doc["recovery_missing"] == 3 and doc["recovery_p95_s"] == 1.89
    lines = found.lines()
    assert lines[0] == (
        "commits lost in 3 of 5 trials (P = 0.60, 95% CI 0.23–0.88); possibly in 5 "
        "(commits in doubt)"
    )
    assert "downtime: p50 0.35 s, p95 4.58 s, max 4.58 s" in lines
    assert "(p95 by nearest rank: below 20 trials it is the max)" in lines
    (sync,) = run_trials(runs[1])
    assert sync.loss_line() == "commits lost in 0 of 4 trials (P = 0.00, 95% CI 0.00–0.49)"


def test_one_event_step_is_not_trials(runs) -> None:
    first = dataclasses.replace(runs[0], steps=runs[0].steps[:1])
    assert run_trials(first) == []


def test_a_step_asked_for_trials_is_shown_even_with_one_that_completed(runs) -> None:
    step = runs[0].steps[0]
    asked = dataclasses.replace(step, params={**step.params, "trials": 3})
    failed = dataclasses.replace(
        step, params={**step.params, "trials": 3, "repetition": 2}, status="failed"
    )
    (found,) = run_trials(dataclasses.replace(runs[0], steps=[asked, failed]))
    assert found.asked == 3 and len(found.trials) == 1 and found.failed == (2,)
    verdict = run_trials(
        dataclasses.replace(runs[0], steps=[asked, failed]), parse_failure_slo("rto=10s")
    )[0].slo
    assert verdict is not None and verdict.outcome == "cannot tell"
    assert verdict.line == "SLO rto=10s: cannot tell: trial 2 (the step failed)"


# --- the verdict -------------------------------------------------------------------------------


def test_the_slo_fails_naming_each_trial_and_why_and_says_what_it_cannot_tell(runs) -> None:
    (found,) = run_trials(runs[0], parse_failure_slo("rto=1s,rpo=0"))
    verdict = found.slo
    assert verdict is not None and verdict.outcome == "fail" and verdict.source == "given"
    outcomes = {c.trial: c.outcome for c in verdict.checks}
    assert outcomes == {1: "missed", 2: "cannot tell", 3: "missed", 4: "cannot tell", 5: "missed"}
    trial_3 = verdict.checks[2].reasons
    assert trial_3 == (
        "4.58 s down (no service until the step's end) > rto 1.00 s",
        "1 commit lost > rpo 0",
    )
    assert verdict.checks[1].reasons == ("0 to 1 commits lost (1 in doubt), rpo 0",)
    assert verdict.line.startswith("SLO rto=1s,rpo=0: failed: 3 of 5 trials missed it: trial 1")


def test_the_slo_passes_only_when_every_trial_met_it(runs) -> None:
    (sync,) = run_trials(runs[1], parse_failure_slo("rto=5s,rpo=0"))
    assert sync.slo is not None and sync.slo.outcome == "pass"
    assert sync.slo.line == "SLO rto=5s,rpo=0: passed: all 4 trials met it"
    # the longest outage of the 4 was 0.28 s (trial 2)
    (tight,) = run_trials(runs[1], parse_failure_slo("rto=250ms"))
    assert tight.slo is not None and tight.slo.outcome == "fail"
    assert [c.trial for c in tight.slo.checks if c.outcome == "missed"] == [2]
    # rpo 1 tolerates the async design's single lost commits
    (loose,) = run_trials(runs[0], parse_failure_slo("rpo=1"))
    assert loose.slo is not None and loose.slo.outcome == "pass"


def test_the_stored_slo_judges_unless_another_is_given(runs) -> None:
    stored = dataclasses.replace(runs[1], environment={**runs[1].environment, "slo": "rto=250ms"})
    assert stored_slo(stored) == FailureSlo(0.25, None)
    (found,) = run_trials(stored)
    assert found.slo is not None and found.slo.source == "stored with the run"
    assert found.slo.outcome == "fail"
    (given,) = run_trials(with_slo(stored, parse_failure_slo("rto=5s")))
    assert given.slo is not None and given.slo.source == "given" and given.slo.outcome == "pass"
    unreadable = dataclasses.replace(runs[1], environment={"slo": "rto=never"})
    assert stored_slo(unreadable) is None and run_trials(unreadable)[0].slo is None


# --- two designs -------------------------------------------------------------------------------


def test_two_designs_loss_counts_compared_by_fishers_exact_test(runs) -> None:
    a, b = run_trials(runs[0])[0], run_trials(runs[1])[0]
    found = compare_loss(a, b)
    # 3/5 vs 0/4: the two-sided p of the 2x2 table [[3, 2], [0, 4]] is 1/6
    assert found.p_value == pytest.approx(1 / 6) and found.significant is False
    assert found.statement("run 2", "run 3") == (
        "loss in 3 of 5 trials (run 2) vs 0 of 4 (run 3): no significant difference in the "
        "probability of loss (Fisher's exact test, p = 0.167)"
    )
    comparison = compare_runs(list(runs)).document()
    (test,) = comparison["trials"]
    assert test["label"] == "pgbench tpcb-like, 4 clients"
    assert test["differences"][0] is None
    assert test["differences"][1]["trials_with_loss"] == [3, 0]
    assert [s["trials"] for s in test["sides"]] == [5, 4]


# --- what is shown -----------------------------------------------------------------------------


def test_the_json_document_has_a_trials_object_per_test_only_with_trials(runs) -> None:
    doc = run_document(with_slo(runs[0], parse_failure_slo("rpo=0")))
    (trials,) = doc["trials"]
    assert trials["trials"] == 5 and trials["trials_with_loss"] == 3
    assert trials["per_trial"][0]["standby_lag_bytes"] == 7744
    assert trials["slo"]["outcome"] == "fail" and trials["percentile_method"] == "nearest rank"
    single = dataclasses.replace(runs[0], steps=runs[0].steps[:1])
    assert "trials" not in run_document(single)


def test_results_show_prints_the_trials_table_and_summary(runs) -> None:
    console = Console(width=160, record=True)
    for part in trials_view.trials_parts(run_trials(runs[0], parse_failure_slo("rpo=0"))):
        console.print(part)
    text = console.export_text()
    assert "Trials: " in text and "(5 trials;" in text  # the title wraps at the table
    assert "7.6 KiB" in text and "4.58 s (to the end)" in text
    assert "commits lost in 3 of 5 trials (P = 0.60, 95% CI 0.23–0.88)" in text
    assert "SLO rpo=0: failed: 3 of 5 trials missed it" in text


def test_the_reports_get_the_table_the_lines_and_two_charts_per_test(runs) -> None:
    from howfast.report.charts import Chart, ChartIds
    from howfast.report.tables import Table

    blocks = trials_view.trials_blocks(run_trials(runs[0]), ChartIds())
    tables = [b for b in blocks if isinstance(b, Table)]
    charts = [b for b in blocks if isinstance(b, Chart)]
    assert len(tables) == 1 and [c.text for c in tables[0].rows[2]][:4] == [
        "3",
        "4.58 s (to the end)",
        "–",
        "1",
    ]
    assert [c.title.rsplit(": ", 1)[1] for c in charts] == [
        "downtime and recovery per trial",
        "lost commits per trial",
    ]
    assert charts[1].traces[0].y == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert charts[1].traces[1].y == [0.0, 1.0, 0.0, 1.0, 0.0]


def test_the_store_keeps_run_slo_in_the_runs_environment(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    try:
        rid = store.create_run("quick", {"hostname": "h"}, "2026-11-29T00:00:00+00:00")
        store.add_run_environment(rid, {"slo": "rto=10s,rpo=0"})
        run = store.get_run(rid)
    finally:
        store.close()
    assert run is not None and run.environment == {"hostname": "h", "slo": "rto=10s,rpo=0"}
    assert stored_slo(run) == FailureSlo(10.0, 0)


def test_run_slo_sends_the_failure_objectives_to_the_run_and_the_latency_one_to_the_steps():
    from howfast.cli.run import run_request_of
    from tests.unit.test_run_options import given

    both = run_request_of(given(slo="p99=10ms,rto=5s,rpo=0"))
    assert both.overrides.slo == "p99=10ms"
    assert both.failure_slo == FailureSlo(5.0, 0)
    latency = run_request_of(given(slo="p99=10ms"))
    assert latency.overrides.slo == "p99=10ms" and latency.failure_slo is None
    failure = run_request_of(given(slo="rpo=0"))
    assert failure.overrides.slo is None and failure.failure_slo == FailureSlo(None, 0)
    with pytest.raises(UsageError, match='unknown key "rtt"'):
        run_request_of(given(slo="rtt=5s"))


def test_trials_without_a_recovery_figure_say_so(runs) -> None:
    """A failover too early in the load (fewer than 3 s before it) has no recovery figure."""
    bare = [dataclasses.replace(t, recovery_s=None) for t in run_trials(runs[1])[0].trials]
    found = dataclasses.replace(run_trials(runs[1])[0], trials=tuple(bare))
    assert "recovery: no figure in any trial" in found.lines()
    assert found.document()["recovery_p95_s"] is None
    assert found.document()["recovery_missing"] == 4
