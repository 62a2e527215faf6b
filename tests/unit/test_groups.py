"""Which steps are the same test: each workload declares the params that make a test
(plugin/workload.py `test_params`), and analysis/groups.py holds no list of its own.

Two guards. Every param a step can have is classified by its workload (a test param, or one
that does not make a test), so that a new param nobody classified fails here instead of
silently merging two tests. And the stored runs of the fixtures group exactly as they did when
groups.py held one list of every workload's test params (OLD_TEST_PARAMS below, copied from
groups.py as it was): every grouping key is reproduced.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from howfast.analysis.groups import group_steps, matching_params, params_key
from howfast.errors import UsageError
from howfast.model import JSONValue, RunRecord, StepRecord
from howfast.plans import expand, load_plan
from howfast.plans.load import builtin_plan_names
from howfast.plugin import registry
from howfast.plugin.workload import COMMON_OTHER_PARAMS, COMMON_TEST_PARAMS
from howfast.service.reading import read_run
from howfast.store import open_store
from tests.unit import goldens
from tests.unit.test_regimes_analysis import regimes_run

DATA = Path(__file__).resolve().parents[1] / "data"

# analysis/groups.py's TEST_PARAMS before the workloads declared theirs (issue 27): the
# reference the stored runs must still group by.
OLD_TEST_PARAMS = (
    *("mode", "scripts", "script", "clients", "jobs", "duration_s", "transactions", "scale"),
    *("dataset", "rate", "rate_fraction", "rate_basis", "curve_role", "slo", "latency_limit_ms"),
    *("protocol", "extra_args", "settings", "warmup", "generate", "fillfactor", "partitions"),
    *("partition_method", "profile", "size_bytes", "runtime_s", "direct", "ioengine", "rw"),
    *("rwmixread", "bs", "iodepth", "numjobs", "fsync", "fdatasync", "sync", "seconds", "cold"),
    "parallel",
    # pgbench's events (issue 29) came after; a built-in plan has them since failover-trials,
    # and they make a test as they always did (test_event_plans.py)
    *("events", "segment"),
)


def old_matching_params(params: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    """groups.matching_params as it was."""
    keys = set(OLD_TEST_PARAMS) - ({"rate"} if "rate_fraction" in params else set())
    return {k: v for k, v in params.items() if k in keys}


def old_group_keys(run: RunRecord) -> list[tuple[str, str, str]]:
    """(target, workload, params key) of each group, in the order groups.group_steps made
    them before."""
    keys: dict[tuple[str, str, str], None] = {}
    for step in run.steps:
        if step.all_params.get("warmup") is True:
            continue
        params = json.dumps(old_matching_params(step.all_params), sort_keys=True, default=str)
        keys.setdefault((step.target, step.workload, params), None)
    return list(keys)


def _imports() -> dict[str, object]:
    """Every recorded pgbench and fio output that imports, as a golden-style case."""
    cases: dict[str, object] = {}
    for kind, pattern in (("pgbench", "*.txt"), ("fio", "*.json")):
        for path in sorted((DATA / kind).glob(pattern)):
            cases[f"import-{kind}-{path.name}"] = goldens.imported(kind, path.name)
    return cases


def fixture_runs() -> Iterator[tuple[str, RunRecord]]:
    """The stored fixture runs: the golden cases, every recorded output imported, and the
    regimes run of test_regimes_analysis, each read back from a store as commands read it."""
    cases = {**goldens.CASES, **_imports()}
    with tempfile.TemporaryDirectory() as tmp:
        db = open_store(str(Path(tmp) / "results.db"))
        try:
            for name, make in cases.items():
                try:
                    run_id = make(db)  # type: ignore[operator]
                except UsageError:
                    continue  # an output the importer refuses (cut short, refused): no run
                run = read_run(db, run_id)
                assert run is not None
                yield name, run
        finally:
            db.close()
    yield "regimes", regimes_run()


FIXTURES = list(fixture_runs())


def planned_steps() -> Iterator[tuple[str, str, dict[str, JSONValue]]]:
    """(plan, workload, params) of every step of every built-in plan and of the test plans
    that load."""
    plans = [*builtin_plan_names(), *(str(p) for p in sorted((DATA / "plans").glob("*.toml")))]
    for name in plans:
        try:
            loaded = load_plan(name)
        except UsageError:
            continue  # the test plans of errors
        for spec in expand(loaded):
            yield Path(name).stem, spec.workload, dict(spec.params)


def test_the_fixtures_cover_every_built_in_workload() -> None:
    stored = {s.workload for _, run in FIXTURES for s in run.steps}
    planned = {workload for _, workload, _ in planned_steps()}
    assert set(registry.plugins()) <= stored | planned
    assert len(FIXTURES) > 40  # the golden cases and every recorded output that imports


def unclassified(workload: str, params: Mapping[str, JSONValue]) -> set[str]:
    plugin = registry.plugin(workload)
    known = {*plugin.test_params, *plugin.other_params, *COMMON_TEST_PARAMS}
    return set(params) - known - set(COMMON_OTHER_PARAMS)


def test_every_param_a_step_has_is_classified_by_its_workload() -> None:
    found: dict[str, set[str]] = {}
    for name, run in FIXTURES:
        for step in run.steps:
            for key in unclassified(step.workload, step.all_params):
                found.setdefault(f"{step.workload}.{key}", set()).add(name)
    for plan, workload, params in planned_steps():
        for key in unclassified(workload, params):
            found.setdefault(f"{workload}.{key}", set()).add(plan)
    assert found == {}, "params no workload says whether they make a test (test_params or " + (
        "other_params in its plan module)"
    )


def test_a_param_is_a_test_param_or_not_never_both() -> None:
    for plugin in registry.plugins().values():
        both = set(plugin.test_params) & {*plugin.other_params, *COMMON_OTHER_PARAMS}
        assert not both, plugin.name
        assert not set(plugin.other_params) & set(COMMON_TEST_PARAMS), plugin.name


def test_an_unclassified_param_is_caught() -> None:
    # What the test above relies on: a param a workload forgot is reported.
    assert unclassified("fio", {"profile": "x", "numjobs": 1, "new_knob": 3}) == {"new_knob"}
    assert unclassified("pgbench", {"mode": "x", "repetition": 2, "until": {}}) == set()


@pytest.mark.parametrize(("name", "run"), FIXTURES, ids=[name for name, _ in FIXTURES])
def test_stored_runs_group_as_they_did(name: str, run: RunRecord) -> None:
    for step in run.steps:
        assert matching_params(step.workload, step.all_params) == old_matching_params(
            step.all_params
        ), (name, step.workload, step.all_params)
    now = [(g.target, g.workload, params_key(g.workload, g.params)) for g in group_steps(run)]
    assert now == old_group_keys(run)


def test_planned_steps_group_as_they_did() -> None:
    for plan, workload, params in planned_steps():
        assert matching_params(workload, params) == old_matching_params(params), (plan, params)


def test_steps_that_differ_only_in_a_test_param_are_two_tests() -> None:
    def fsync(seconds: int, version: str) -> StepRecord:
        return StepRecord("/a", "pg_test_fsync", {"seconds": seconds}, "completed", "", "",
                          resolved={"pg_version": version})  # fmt: skip

    run = RunRecord(1, "p", "completed", "", None, {}, [],
                    [fsync(1, "16.1"), fsync(1, "16.2"), fsync(2, "16.1")])  # fmt: skip
    groups = group_steps(run)
    assert [(dict(g.params), g.n) for g in groups] == [({"seconds": 1}, 2), ({"seconds": 2}, 1)]


def test_a_workload_this_howfast_does_not_know_groups_by_every_known_test_param() -> None:
    params: dict[str, JSONValue] = {"clients": 2, "knob": 1, "seconds": 3, "repetition": 2}
    assert matching_params("sysbench", params) == {"clients": 2, "seconds": 3}
