"""No hidden list to forget (issue 36): what used to be written out in a module of its own is
derived from what each plug-in declares, shown with plug-ins installed apart as a user
installs them: the toy workload (tests/toy_workload, its program psql), the toy sampler
(tests/toy_sampler, its section `loadavg`) and a gadget workload written here that declares
the replication traits.

- a step's sampled sections in `results show --json`: model.CONTRACT_SECTIONS + each sampler's
  `sections` (samplers/registry.step_sections);
- cleanup's TOOL_PROGRAMS (targets/leftovers/groups.py) and doctor's install commands
  (service/install_hints.py): the workloads' `programs`;
- the replication figures and the designs' table (analysis/derive.py, analysis/replication.py):
  the `design_figures`, `loads_data` and `load_metric` traits, not pgbench's name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import typing
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from howfast.analysis.derive import derive_run
from howfast.analysis.replication import design_rows
from howfast.analysis.why import DECISIVE, FALLBACK, RULES, WEIGHED
from howfast.checks import Check
from howfast.metrics.families import FAMILIES, SAMPLED_FAMILIES, RunMetrics
from howfast.model import CONTRACT_SECTIONS, RunRecord, StepRecord, TargetRecord
from howfast.plugin import registry
from howfast.samplers import registry as samplers
from howfast.samplers.session import TargetSampling
from howfast.service.install_hints import install_command, missing_tools, with_install_hints
from howfast.service.reading import read_run, run_document
from howfast.store import open_store
from tests.toy_workload.test_toy_workload import install as install_toy_workload
from tests.unit.test_discovery import distribution
from tests.unit.test_replication_analysis import _step
from tests.unit.test_samplers_session import FakeTarget

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory of installed distributions on sys.path, forgotten afterwards."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    try:
        yield path
    finally:
        monkeypatch.undo()
        registry.reset()
        samplers.sampler_plugins.cache_clear()


# --- sampled sections ------------------------------------------------------------------------


def test_the_built_in_samplers_declare_the_sections_the_json_contract_promises() -> None:
    assert samplers.step_sections() == CONTRACT_SECTIONS == ("io", "cpu", "postgres")


def _document_of(db_path: Path, sections: dict[str, dict[str, object]]) -> dict[str, object]:
    """`results show --json` of a run with a sampled step and one that was not."""
    step = StepRecord("t", "fio", {"seconds": 1}, "completed", "", "", sections=sections)
    with open_store(str(db_path)) as store:
        run_id = store.create_run("quick", {}, "2026-11-28T10:00:00+00:00")
        store.add_target(run_id, TargetRecord(name="t", kind="local"))
        store.add_step(run_id, step)
        store.add_step(run_id, replace(step, sections={}))
        run = read_run(store, run_id)
    assert run is not None
    document = json.loads(json.dumps(run_document(run)))
    assert isinstance(document, dict)
    return document


def test_a_sampler_installed_apart_has_its_section_in_the_json(site: Path, tmp_path: Path) -> None:
    distribution(
        site, "howfast_loadavg", "howfast.samplers", "x = tests.toy_sampler.sampler:SAMPLER"
    )
    samplers.sampler_plugins.cache_clear()
    session = TargetSampling(FakeTarget(), None, 0.05).start("fio")  # fio: a sampled workload
    time.sleep(0.2)
    session.stop()
    part = session.part()
    assert part is not None and part.sections["loadavg"]["readings"] >= 2  # begin + stop

    document = _document_of(tmp_path / "with.db", dict(part.sections))
    sampled, plain = document["steps"]  # type: ignore[misc]
    assert list(sampled)[-5:] == ["io", "cpu", "postgres", "loadavg", "why"]
    assert sampled["loadavg"] == part.sections["loadavg"]
    assert plain["loadavg"] is None  # not sampled: null, as the others

    samplers.sampler_plugins.cache_clear()
    sys.path.remove(str(site))  # the toy uninstalled: its section is no more in the contract
    document = _document_of(tmp_path / "without.db", dict(part.sections))
    assert "loadavg" not in document["steps"][0]  # type: ignore[index]
    sys.path.insert(0, str(site))


# --- programs: cleanup and doctor's install commands --------------------------------------


def _tool_programs(pythonpath: list[Path]) -> list[str]:
    code = (
        "from howfast.targets.leftovers.groups import TOOL_PROGRAMS; print(sorted(TOOL_PROGRAMS))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return list(json.loads(out.stdout.replace("'", '"')))


def test_cleanup_looks_for_the_programs_the_workloads_declare(tmp_path: Path) -> None:
    """A process finds its distributions when it starts: a fresh interpreter each time."""
    assert _tool_programs([ROOT]) == ["fio", "pg_test_fsync", "pgbench"]
    install_toy_workload(tmp_path / "site")
    assert _tool_programs([ROOT, tmp_path / "site"]) == ["fio", "pg_test_fsync", "pgbench", "psql"]


def test_doctor_names_the_packages_a_workload_declares(site: Path) -> None:
    everything = ["postgresql", "pgbench", "pg_test_fsync", "fio", "psql"]
    assert install_command("debian", everything) == (
        "sudo apt-get install -y postgresql postgresql-contrib fio"  # psql: no workload has it
    )
    install_toy_workload(site)
    registry.reset()
    assert install_command("debian", everything) == (
        "sudo apt-get install -y postgresql postgresql-contrib postgresql-client fio"
    )
    assert install_command("rhel", ["psql"]) == "sudo dnf install -y postgresql"
    assert install_command("macos", ["psql"]) is None  # none declared for Homebrew
    checks = [Check("postgresql 17.2", True, ""), Check("psql", False, "", hint="psql's own")]
    assert missing_tools(checks) == ["psql"]
    (hinted,) = [c for c in with_install_hints(checks, "rhel") if c.name == "psql"]
    assert hinted.hint == "install it with: sudo dnf install -y postgresql"


# --- the replication figures: traits, not pgbench's name --------------------------------------

GADGETS = """
from typing import Literal

from howfast.plugin.workload import StepModel, WorkloadPlugin


class GadgetStep(StepModel):
    workload: Literal["gadget"]


class Gadget(WorkloadPlugin[GadgetStep]):
    name = "gadget"
    model = GadgetStep
    order = 90
    test_params = ("mode", "clients", "scale")
    design_figures = {design_figures}

    def expand(self, step, ctx):
        return ctx.repeated("gadget")

    def label(self, params):
        return "gadget"


class GadgetLoad(Gadget):
    name = "gadget-load"
    test_params = ("scale",)
    design_figures = False
    loads_data = True
    load_metric = "gadget_load_s"


GADGET = Gadget()
LOAD = GadgetLoad()
"""


def _design_run(measured: str, load: str, load_metric: str) -> RunRecord:
    """tests/unit/test_replication_analysis.py's two designs (alone, with a sync standby),
    their steps of workloads `measured` and `load`."""

    def step(target: str, clients: int, tps: float, p99: float, standby: bool) -> StepRecord:
        found = _step(syncrep=40 if standby else 0, commit=40, cpu=20, lags=[1.5, 2.0, 1.0])
        found = replace(found, target=target, workload=measured,
                        metrics={"tps": tps, "latency_p99_ms": p99})  # fmt: skip
        found.params["clients"] = clients
        if not standby:
            del found.sections["postgres"]["replication"]
        return found

    def loaded(target: str, seconds: float) -> StepRecord:
        return StepRecord(target, load, {"scale": 1}, "completed", "", "",
                          metrics={load_metric: seconds})  # fmt: skip

    sync = "/a with 1 sync standby (on)"
    steps = [
        loaded("/a", 2.5),
        step("/a", 1, 400.0, 4.0, False),
        step("/a", 4, 1200.0, 6.0, False),
        loaded(sync, 3.5),
        step(sync, 1, 300.0, 5.0, True),
        step(sync, 1, 320.0, 5.5, True),
        step(sync, 4, 1000.0, 7.0, True),
    ]
    settings = {"synchronous_standby_names": "FIRST 1 (standby_1)", "synchronous_commit": "on"}
    targets = [
        TargetRecord("/a", "local", settings={}),
        TargetRecord(sync, "local", settings=settings),
    ]
    return derive_run(RunRecord(3, "replication", "completed", "", None, {}, targets, steps))


@pytest.mark.parametrize("design_figures", [True, False])
def test_the_replication_figures_follow_the_workloads_traits(
    site: Path, design_figures: bool
) -> None:
    (site / "howfast_gadgets.py").write_text(
        textwrap.dedent(GADGETS.format(design_figures=design_figures))
    )
    entries = ("gadget = howfast_gadgets:GADGET", "gadget-load = howfast_gadgets:LOAD")
    distribution(site, "howfast_gadgets", "howfast.workloads", *entries)
    registry.reset()
    try:
        pgbench = _design_run("pgbench", "pgbench-init", "init_total_s")
        gadget = _design_run("gadget", "gadget-load", "gadget_load_s")
    finally:
        sys.modules.pop("howfast_gadgets", None)
    synced = [s for s in gadget.steps if s.workload == "gadget" and "standby" in s.target]
    if design_figures:  # derived and tabled as pgbench's steps are
        assert design_rows(gadget) == design_rows(pgbench)
        assert synced[0].metrics["wait_syncrep_share"] == 0.4
    else:  # a workload that does not declare it: no replication figure, no design's row
        assert "wait_syncrep_share" not in synced[0].metrics
        assert [(r.load_s, r.tps) for r in design_rows(gadget)] == [(2.5, {}), (3.5, {})]


# --- rules and families declared as data ---------------------------------------------------


def test_the_why_rules_are_in_their_stages_order() -> None:
    """decide() relies on it: the decisive rules first, the fallbacks last."""
    order = {DECISIVE: 0, WEIGHED: 1, FALLBACK: 2}
    stages = [order[rule.stage] for rule in RULES]
    assert stages == sorted(stages) and set(stages) == {0, 1, 2}
    assert len({rule.name for rule in RULES}) == len(RULES)


def test_each_declared_family_is_an_attribute_of_its_kind() -> None:
    hints = typing.get_type_hints(RunMetrics)
    metrics = RunMetrics()
    declared = (*FAMILIES, *SAMPLED_FAMILIES)
    assert len({f.attribute for f in declared}) == len({f.name for f in declared}) == 27
    for family in declared:
        assert hints[family.attribute] is family.kind
        assert isinstance(getattr(metrics, family.attribute), family.kind)
