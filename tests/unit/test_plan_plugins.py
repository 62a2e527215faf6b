"""Plug-ins found, not listed: the workload registry and what each workload's plan module
owns, the sampler and target-kind registries, and the import directions they keep
(plans and sizing, analysis and the executors)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

import howfast.workloads as workloads_package
from howfast.analysis.groups import step_label
from howfast.analysis.hooks import NOTHING, analysis_for
from howfast.analysis.metrics import HEADLINE_METRICS, KEY_METRICS, metric
from howfast.cli.progress import step_summary
from howfast.errors import HowfastError, UsageError
from howfast.metrics.families import RunMetrics, step_labels
from howfast.model import StepRecord
from howfast.plans import Overrides, expand, load_plan
from howfast.plans.model import STEP_MODELS, Plan
from howfast.plugin import registry
from howfast.plugin.importing import TextImporter
from howfast.plugin.loading import load
from howfast.plugin.workload import ExpandContext, StepModel
from howfast.samplers.cgroupmem import CgroupMemorySampler
from howfast.samplers.checkpoints import CheckpointSampler
from howfast.samplers.cpu import CpuSampler
from howfast.samplers.diskstats import DiskSampler
from howfast.samplers.pgstats import PgStatsSampler
from howfast.samplers.plugin import SamplerSetup
from howfast.samplers.registry import create_samplers, samplers_for
from howfast.samplers.waits import WaitEventSampler
from howfast.service.importer import importer_for, importers
from howfast.targets.kind import TargetOptions
from howfast.targets.registry import kind_for
from howfast.workloads import get_workload
from howfast.workloads.base import Workload

WORKLOADS = ["pgbench-init", "pgbench", "fio", "pg_test_fsync", "seqread"]


# --- workloads ---------------------------------------------------------------------------


def test_every_workload_is_found_in_its_order() -> None:
    assert list(registry.plugins()) == WORKLOADS
    assert list(STEP_MODELS) == WORKLOADS
    assert registry.step_models() == STEP_MODELS


@pytest.mark.parametrize("name", WORKLOADS)
def test_a_plugin_names_its_executor_which_agrees_with_it(name: str) -> None:
    plugin = registry.plugin(name)
    executor = get_workload(name)
    assert isinstance(executor, Workload)
    assert f"{type(executor).__module__}:{type(executor).__name__}" == plugin.executor_class
    assert executor.name == name
    assert executor.needs_server == plugin.needs_server
    assert get_workload(name) is not executor  # a new one each time
    params = expand_one(name)
    assert executor.label(params) == plugin.label(params)


def expand_one(name: str) -> dict[str, object]:
    """The params of the first step of `name` in the built-in plans."""
    for plan in ("quick", "sweep", "checkpoints", "rate-curve", "regimes"):
        for spec in expand(load_plan(plan)):
            if spec.workload == name:
                return spec.params
    step = {"pg_test_fsync": {"seconds": 2}, "fio": {"profiles": ["wal-fsync"]}}[name]
    model = STEP_MODELS[name].model_validate({"workload": name, **step})
    return registry.plugin(name).expand(model, ExpandContext(Overrides(), 1))[0].params


def test_an_unknown_workload_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown workload 'sysbench'; known: pgbench-init, "):
        registry.plugin("sysbench")
    with pytest.raises(ValueError, match="sysbench"):
        get_workload("sysbench")
    assert registry.find("sysbench") is None


def test_a_workload_s_part_of_reading_a_run_is_named_by_its_plugin() -> None:
    from howfast.workloads.fio.analysis import ANALYSIS

    assert analysis_for("fio") is ANALYSIS
    assert analysis_for("seqread") is NOTHING  # declares none: its steps read as stored
    assert analysis_for("sysbench") is NOTHING  # a workload this howfast does not know
    with pytest.raises(ValueError, match="is not 'module:attribute'"):
        load("howfast.workloads.fio.analysis")


def test_the_plan_model_is_built_from_the_step_models() -> None:
    plan = Plan.model_validate(
        {
            "steps": [
                {"workload": "pgbench-init", "scale": 2},
                {"workload": "fio", "profiles": ["seq-read-8k-qd32"]},
                {"workload": "seqread"},
            ]
        }
    )
    assert [type(step) for step in plan.steps] == [
        STEP_MODELS["pgbench-init"],
        STEP_MODELS["fio"],
        STEP_MODELS["seqread"],
    ]
    assert all(isinstance(step, StepModel) for step in plan.steps)


@pytest.mark.parametrize(
    ("workload", "params", "seconds"),
    [
        ("pgbench", {"duration_s": 30}, 30.0),
        ("pgbench", {"transactions": 1000}, None),
        ("pgbench-init", {"scale": 10}, 5.0),
        ("pgbench-init", {"dataset": "on-disk"}, 2.3),
        ("fio", {"runtime_s": 10}, 11.0),
        ("pg_test_fsync", {"seconds": 2}, 32.0),
        ("seqread", {"cold": True}, None),
        ("sysbench", {}, None),
    ],
)
def test_each_workload_says_how_long_its_steps_take(
    workload: str, params: dict[str, object], seconds: float | None
) -> None:
    assert registry.expected_seconds(workload, params) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("workload", "params", "label"),
    [
        ("pgbench", {"mode": "select-only", "clients": 1}, "pgbench select-only, 1 client"),
        (
            "pgbench",
            {"mode": "tpcb-like", "clients": 4, "rate_fraction": 0.5, "settings": {"a": "1"}},
            "pgbench tpcb-like, 4 clients, rate 50% of the maximum, a=1",
        ),
        ("fio", {"profile": "wal-fsync", "size_bytes": 8192}, "fio wal-fsync"),
        ("pgbench-init", {"scale": 10}, "pgbench-init scale 10"),
        ("pg_test_fsync", {"seconds": 5}, "pg_test_fsync"),
        ("seqread", {"cold": True}, "seqread"),
        ("sysbench", {"x": 1}, "sysbench"),  # a workload this howfast does not know
    ],
)
def test_the_short_label_comes_from_the_workload(
    workload: str, params: dict[str, object], label: str
) -> None:
    assert step_label(workload, params) == label


def test_key_metrics_come_from_the_workloads() -> None:
    assert KEY_METRICS["pgbench"][:2] == ("tps", "steady_tps")
    assert KEY_METRICS.get("seqread", ()) == ()  # no key metrics: left out
    assert set(KEY_METRICS) == {"pgbench", "pgbench-init", "fio", "pg_test_fsync"}
    assert HEADLINE_METRICS["pg_test_fsync"] == ("fdatasync_ops_s",)
    for name in (m for metrics in KEY_METRICS.values() for m in metrics):
        assert metric(name).label != name, f"{name} has no catalogue entry"
    assert metric("commit_ceiling_tps").unit == "commits/s"
    assert metric("no_such_metric").higher_is_better is None


def _completed(workload: str, **metrics: object) -> StepRecord:
    return StepRecord("/a", workload, {}, "completed", "", "", metrics=dict(metrics))


@pytest.mark.parametrize(
    ("workload", "metrics", "line"),
    [
        ("pgbench", {"tps": 1234.56, "latency_avg_ms": 3.2, "latency_p99_ms": 9.0},
         "completed: 1,234.6 tps, avg 3.200 ms, p99 9.000 ms"),
        ("pgbench-init", {"init_total_s": 4.0, "generate_s": 2.0}, "completed: loaded in 4.00 s"),
        ("fio", {"read_iops": 2100.0, "write_iops": 2095.4},
         "completed: write 2,095 IOPS, read 2,100 IOPS"),
        ("pg_test_fsync", {"fdatasync_ops_s": 800.0}, "completed"),
        ("seqread", {"seqread_s": 2.0}, "completed"),
        ("sysbench", {"tps": 1.0}, "completed"),  # a workload this howfast does not know
    ],
)  # fmt: skip
def test_the_end_of_step_line_says_what_the_workload_says(
    workload: str, metrics: dict[str, object], line: str
) -> None:
    assert step_summary(_completed(workload, **metrics)) == line


def test_the_programs_the_doctor_checks_are_declared_by_the_workloads() -> None:
    found = registry.programs()
    assert [p.name for p in found] == ["pgbench", "fio", "pg_test_fsync"]  # each once
    assert [p.name for p in registry.programs("postgres")] == ["pgbench", "pg_test_fsync"]
    (fio,) = registry.programs("path")
    assert fio.hint == "sudo apt-get install -y fio" and not fio.required
    assert registry.plugin("pgbench").programs[0].required


def test_the_workloads_that_import_their_output_declare_their_importer() -> None:
    found = importers()
    assert list(found) == ["pgbench", "fio"]
    assert all(isinstance(i, TextImporter) and i.help and i.label_help for i in found.values())
    with pytest.raises(UsageError, match="nothing imports 'seqread'; known: pgbench, fio"):
        importer_for("seqread")


def test_prometheus_labels_and_families_come_from_the_workloads() -> None:
    pgbench = step_labels(1, "p", "/a", "pgbench", {"mode": "tpcb-like", "clients": 4}, 0)
    assert (pgbench.mode, pgbench.clients) == ("tpcb-like", "4")
    fio = step_labels(1, "p", "/a", "fio", {"profile": "wal-fsync", "clients": 4}, 0)
    assert (fio.mode, fio.clients) == ("wal-fsync", "")  # fio has no clients
    unknown = step_labels(1, "p", "/a", "sysbench", {"mode": "x", "profile": "y"}, 0)
    assert (unknown.mode, unknown.clients) == ("", "")
    families = RunMetrics().workload_families
    assert [f.name for f, _ in families["fio"]] == ["step_fio_iops", "step_fio_bytes_per_second"]
    assert families["pgbench"] == []


def test_adding_a_workload_is_one_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "__init__.py").write_text("")
    (tmp_path / "toy" / "plan.py").write_text(
        textwrap.dedent(
            """
            from typing import Literal

            from howfast.plugin.workload import StepModel, WorkloadPlugin


            class ToyStep(StepModel):
                workload: Literal["toy"]
                seconds: int = 3


            class ToyPlugin(WorkloadPlugin[ToyStep]):
                name = "toy"
                model = ToyStep
                key_metrics = ("toy_ops",)
                executor_class = "howfast.workloads.seqread.workload:SeqreadWorkload"

                def expand(self, step, ctx):
                    return ctx.repeated("toy", seconds=step.seconds)

                def label(self, params):
                    return f"a toy for {params['seconds']} s"

                def short_label(self, params):
                    return "toy"

                def expected_seconds(self, params):
                    return float(params["seconds"])


            PLUGIN = ToyPlugin()
            """
        )
    )
    monkeypatch.setattr(workloads_package, "__path__", [*workloads_package.__path__, str(tmp_path)])
    registry.plugins.cache_clear()
    try:
        toy = registry.plugin("toy")
        assert list(registry.plugins())[-1] == "toy"
        step = toy.model.model_validate({"workload": "toy"})
        specs = toy.expand(step, ExpandContext(Overrides(), repeat=2))
        assert [(s.workload, s.params, s.repetition) for s in specs] == [
            ("toy", {"seconds": 3}, 1),
            ("toy", {"seconds": 3}, 2),
        ]
        assert registry.expected_seconds("toy", {"seconds": 3}) == 3.0
        assert step_label("toy", {"seconds": 3}) == "toy"
    finally:
        monkeypatch.undo()
        registry.plugins.cache_clear()
        sys.modules.pop("howfast.workloads.toy.plan", None)
        sys.modules.pop("howfast.workloads.toy", None)
    assert "toy" not in registry.plugins()


def _distribution(root: Path, name: str, entry: str) -> None:
    """An installed distribution as Python finds one on sys.path: its dist-info directory
    with an entry point in the `howfast.workloads` group."""
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[howfast.workloads]\n{entry}\n")


def test_a_workload_installed_apart_is_found_by_its_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "howfast_gadget").mkdir()
    (tmp_path / "howfast_gadget" / "__init__.py").write_text("")
    (tmp_path / "howfast_gadget" / "plan.py").write_text(
        textwrap.dedent(
            """
            from typing import Literal

            from howfast.plugin.workload import StepModel, WorkloadPlugin


            class GadgetStep(StepModel):
                workload: Literal["gadget"]


            class GadgetPlugin(WorkloadPlugin[GadgetStep]):
                name = "gadget"
                model = GadgetStep
                order = 5
                test_params = ("size",)

                def expand(self, step, ctx):
                    return ctx.repeated("gadget", size=1)

                def label(self, params):
                    return "gadget"


            PLUGIN = GadgetPlugin()
            """
        )
    )
    _distribution(tmp_path, "howfast_gadget", "gadget = howfast_gadget.plan:PLUGIN")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset()
    try:
        assert list(registry.plugins())[:2] == ["gadget", "pgbench-init"]  # by its order
        assert registry.same_test_params("gadget", {"size": 2, "other": 1}) == {"size": 2}
        assert registry.step_models()["gadget"].__name__ == "GadgetStep"
    finally:
        monkeypatch.undo()
        registry.reset()
        sys.modules.pop("howfast_gadget.plan", None)
        sys.modules.pop("howfast_gadget", None)
    assert "gadget" not in registry.plugins()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("broken = howfast_missing_module:PLUGIN", "cannot be loaded: No module named"),
        ("notaplugin = os:sep", "is not a WorkloadPlugin"),
        ("twice = howfast.workloads.fio.plan:PLUGIN", "workload 'fio' is defined twice"),
    ],
)
def test_a_bad_entry_point_is_refused_with_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str, message: str
) -> None:
    _distribution(tmp_path, "howfast_bad", entry)
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset()
    try:
        with pytest.raises(HowfastError, match=message):
            registry.plugins()
    finally:
        monkeypatch.undo()
        registry.reset()
    assert "fio" in registry.plugins()


# --- samplers ----------------------------------------------------------------------------


class FakeTarget(SimpleNamespace):
    def __init__(self, log: Path | None = None, group: object = None) -> None:
        super().__init__(log=log, group=group)

    def server_log_file(self) -> Path | None:
        return self.log

    def memory_cgroup(self) -> object:
        return self.group

    def server_io(self) -> object:
        return None  # no server started here: no I/O of its own to read


def test_samplers_watch_the_sampled_workloads_in_their_order() -> None:
    # instances: only on a target whose servers an operator runs (samplers/instances.py)
    # instance-metrics too (samplers/instance_metrics.py)
    names = [
        "cpu", "diskstats", "serverio", "instances", "pgstats", "checkpoints",
        "instance-metrics", "cgroupmem",
    ]  # fmt: skip
    for workload in ("fio", "seqread"):
        assert [s.name for s in samplers_for(workload)] == names
    # Wait events are sampled during pgbench steps only.
    assert (
        [s.name for s in samplers_for("pgbench")]
        == [
            *names[:4],
            "standby-io",  # only on a primary with standbys (samplers/standbys.py)
            names[4],
            "waits",
            "replication",  # only on a primary with standbys (samplers/replication.py)
            *names[5:],
        ]
    )
    for workload in ("pgbench-init", "pg_test_fsync", "sysbench"):
        assert samplers_for(workload) == []


def test_a_sampler_is_made_only_where_the_target_has_something_for_it(tmp_path: Path) -> None:
    bare = SamplerSetup(FakeTarget(), None)  # type: ignore[arg-type]
    assert [type(s) for s in create_samplers("fio", bare)] == [CpuSampler]
    log = tmp_path / "server.log"
    log.write_text("")
    full = SamplerSetup(
        FakeTarget(log, group=object()),  # type: ignore[arg-type]
        connection=object(),  # type: ignore[arg-type]
        role_devices={"data": "sda"},
    )
    assert [type(s) for s in create_samplers("pgbench", full)] == [
        CpuSampler,
        DiskSampler,
        PgStatsSampler,
        WaitEventSampler,
        CheckpointSampler,
        CgroupMemorySampler,
    ]
    assert create_samplers("pgbench-init", full) == []


# --- target kinds ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("/mnt/nvme/bench", "local"),
        ("bench", "local"),
        ("postgresql://bench@db/bench", "dsn"),
        ("postgres://db/bench", "dsn"),
        ("k8s://longhorn", "k8s"),
    ],
)
def test_a_target_text_is_recognised_by_its_kind(text: str, kind: str) -> None:
    assert kind_for(text).name == kind


def test_an_unknown_target_is_refused_with_what_to_give() -> None:
    with pytest.raises(
        UsageError,
        match=r"give a directory or a k8s://STORAGECLASS or a cnpg://\[NAMESPACE/\]CLUSTER or a "
        "postgresql:// URI",
    ):
        kind_for("s3://bucket")
    options = TargetOptions(install=None)  # type: ignore[arg-type]
    (target,) = kind_for("k8s://longhorn").create("k8s://longhorn", options)  # nothing contacted
    assert target.kind == "k8s" and target.name == "k8s://longhorn"
    with pytest.raises(UsageError, match="k8s://CLASS\\?wal=CLASS2"):
        kind_for("k8s://a").create("k8s://a", TargetOptions(install=None, wal_dir=Path("/w")))  # type: ignore[arg-type]


# --- import directions -------------------------------------------------------------------
# The static rule is import-linter's (tests/unit/test_layers.py); these check what a process
# actually loads, which also covers the executors a plug-in names by a string.

# Packages that run things: none of them is loaded by planning nor by reading a run.
RUNNING_PACKAGES = (
    "howfast.machine",
    "howfast.hosts",
    "howfast.targets",
    "howfast.samplers",
    "howfast.runner",
    "howfast.service",
    "howfast.cli",
)


def executor_modules() -> set[str]:
    """The modules of the executors the workloads name, and their base class's."""
    names = {p.executor_class.partition(":")[0] for p in registry.plugins().values()}
    return names | {Workload.__module__}


def loaded_after(code: str) -> set[str]:
    """The howfast modules a fresh interpreter has loaded after running `code`."""
    script = f"{code}\nimport sys\nprint('\\n'.join(m for m in sys.modules if 'howfast' in m))"
    root = Path(__file__).resolve().parents[2]  # READ_FIXTURE_RUNS imports tests.unit
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=root
    ).stdout
    return set(out.split())


def executors_in(modules: set[str]) -> list[str]:
    executors = executor_modules()
    return sorted(
        m
        for m in modules
        if m in executors or any(m == p or m.startswith(p + ".") for p in RUNNING_PACKAGES)
    )


def test_the_executors_are_those_the_workloads_name() -> None:
    assert "howfast.workloads.fio.workload" in executor_modules()
    assert executors_in(
        {"howfast.hosts.local", "howfast.workloads.seqread.workload", "howfast.units"}
    ) == [
        "howfast.hosts.local",
        "howfast.workloads.seqread.workload",
    ]


def test_sizing_does_not_import_plans() -> None:
    loaded = loaded_after("import howfast.sizing; howfast.sizing.parse_dataset('1GiB')")
    assert not any(m.startswith("howfast.plans") for m in loaded)
    assert "howfast.units" in loaded


# Plans whose steps have events: parsing an event's text finds the event actions
# (plugin/events.py), whose modules import the target capabilities they require.
PLANS_WITH_EVENTS = ("failover-trials",)


def test_plans_do_not_import_the_executors() -> None:
    loaded = loaded_after(
        "from howfast.plans import builtin_plan_names, expand, load_plan\n"
        "for name in builtin_plan_names():\n"
        f"    if name not in {PLANS_WITH_EVENTS!r}: expand(load_plan(name))"
    )
    assert executors_in(loaded) == []
    with_events = loaded_after(
        "from howfast.plans import expand, load_plan\n"
        f"for name in {PLANS_WITH_EVENTS!r}: expand(load_plan(name))"
    )
    assert "howfast.events.failover" in with_events  # the reason they are apart
    assert not [m for m in with_events if m.startswith(("howfast.runner", "howfast.samplers"))]


READ_FIXTURE_RUNS = """
from howfast.analysis.derive import derive_run
from howfast.analysis.groups import group_steps
from howfast.analysis.overview import overview
from howfast.model import RunRecord
from howfast.report import document, terminal
from tests.unit.stored_runs import ENVIRONMENT, fio, init, pgbench

steps = [
    init("/a", 10.0),
    *(pgbench("/a", tps, repetition=r) for r, tps in enumerate([900.0, 910.0], 1)),
    pgbench("/a", 300.0, rate=300.0, slo="p99=10ms", curve_last=True),
    fio("/a", "wal-fsync", write_iops=900.0, sync_lat_avg_ms=1.0),
    fio("/a", "rand-read-4k-qd64", read_iops=45000.0),
]
run = derive_run(RunRecord(1, "quick", "completed", "t0", "t1", ENVIRONMENT, [], steps))
assert group_steps(run) and run.document()["steps"]
document.build(overview([run]))
terminal.run_details(run)
"""


def test_reading_a_run_imports_no_executor() -> None:
    # Deriving, grouping and rendering a run as `results show` and `report` do; fio's part of
    # the derivation is loaded, its executor is not.
    loaded = loaded_after(READ_FIXTURE_RUNS)
    assert "howfast.report.document" in loaded and "howfast.analysis.derive" in loaded
    assert "howfast.workloads.fio.analysis" in loaded
    assert executors_in(loaded) == []


def test_a_plan_module_can_be_imported_first() -> None:
    # A plan module imports nothing of howfast.plans, which is built from the plan modules.
    loaded = loaded_after(
        "import howfast.workloads.pgbench.plan\n"
        "from howfast.plans import expand, load_plan\n"
        "assert len(expand(load_plan('quick'))) > 1"
    )
    assert "howfast.workloads.pgbench.plan" in loaded
