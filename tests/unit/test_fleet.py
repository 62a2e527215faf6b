"""Fleets, the pure parts: the [fleet] plan section, Jain's fairness, per-class figures and
verdicts from recorded per-instance results."""

from __future__ import annotations

import pytest

from howfast.analysis.fleet import fleet_figures, fleet_verdicts, is_fleet, jain_index
from howfast.errors import PlanError
from howfast.iolimits import IoLimits, scheduler_of, weight_problem
from howfast.machine.cgroup import CgroupSupport
from howfast.model import JSONValue, RunRecord, StepRecord
from howfast.plans import expand, load_plan, parse_plan
from howfast.targets.fleet import limits_problem

STEP = '[[steps]]\nworkload = "pgbench"\nmodes = ["tpcb-like"]\nclients = [2]\nduration = "3s"\n'


def test_fleet_section_classes_and_scenarios():
    plan = parse_plan(
        '[fleet]\nclasses = [{ name = "high", count = 2, iops = 2000 },\n'
        '  { name = "be", count = 3, write_iops = 100, weight = 50 }]\n' + STEP,
        source="f.toml",
    )
    assert plan.fleet is not None
    (scenario,) = plan.fleet.all_scenarios()
    assert scenario.name == "classes" and scenario.instances == 5
    high, be = scenario.classes
    assert high.limits() == IoLimits(read_iops=2000, write_iops=2000)
    assert be.limits() == IoLimits(write_iops=100, weight=50)
    builtin = load_plan("fleet")
    assert builtin.fleet is not None
    assert [s.name for s in builtin.fleet.all_scenarios()] == ["shared", "classes", "one-critical"]
    assert all(s.instances == 8 for s in builtin.fleet.all_scenarios())
    assert [s.workload for s in expand(builtin)] == ["pgbench-init", "pgbench", "pgbench"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[fleet]\nclasses = [{ name = "a", iops = 5, read_iops = 3 }]\n',
         r"f\.toml:2: fleet\.classes\[0\]\.iops: give iops or read_iops"),
        ('[fleet]\nclasses = [{ name = "a" }, { name = "a" }]\n', "listed more than once: a"),
        ('[fleet]\nclasses = [{ name = "A B" }]\n', r"fleet\.classes\[0\]\.name"),
        ('[fleet]\nclasses = [{ name = "a", count = 300 }]\n', "300 instances, at most 256"),
        ("[fleet]\n", "give classes"),
        ('[fleet]\nclasses = [{ name = "a", weight = 0 }]\n', r"weight"),
    ],
)  # fmt: skip
def test_fleet_mistakes_say_which_key(text: str, message: str):
    with pytest.raises(PlanError, match=message):
        parse_plan(text + STEP, source="f.toml")


def test_jain_index():
    assert jain_index([100.0, 100.0, 100.0]) == pytest.approx(1.0)
    assert jain_index([300.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain_index([]) is None and jain_index([0.0, 0.0]) is None


def _step(klass: str, n: int, tps: float, p99: float, writes: int, limit: int | None = None,
          scenario: str = "classes") -> StepRecord:  # fmt: skip
    params: dict[str, JSONValue] = {"mode": "tpcb-like", "clients": 2, "duration_s": 3}
    params |= {"scenario": scenario, "class": klass, "instance": n}
    if limit:
        params["io_limits"] = {"read_iops": limit, "write_iops": limit}
    resolved = {"own_read_ios": 0, "own_write_ios": writes, "own_io_seconds": 3.0}
    metrics = {"tps": tps, "latency_p50_ms": p99 / 4, "latency_p99_ms": p99}
    return StepRecord(f"d {scenario}/{klass}-{n}", "pgbench", params, "completed", "a", "b",
                      metrics=metrics, resolved=resolved)  # fmt: skip


def test_figures_and_verdicts_from_recorded_instances():
    steps = [
        _step("high", 1, 700.0, 10.0, 4200, 2000),
        _step("high", 2, 740.0, 9.0, 4500, 2000),
        _step("best-effort", 1, 60.0, 110.0, 450, 150),
        _step("best-effort", 2, 61.0, 104.0, 449, 150),
        _step("leaky", 1, 300.0, 20.0, 1200, 200),  # 400 IOPS against a 200 cap
    ]
    run = RunRecord(1, "fleet", "completed", "a", "b", {}, [], steps)
    assert is_fleet(run)
    high, best, leaky = fleet_figures(run)
    assert (high.instances, high.total_tps, high.median_tps) == (2, 1440.0, 720.0)
    assert high.p99_ms == 10.0 and high.fairness == pytest.approx(0.99923, abs=1e-4)
    assert best.share == pytest.approx(121 / 1861)
    assert best.write_iops == [150.0, pytest.approx(149.667, abs=1e-3)]
    assert best.enforcement() == ["the write limit held: at most 150 of 150 IOPS"]
    assert high.enforcement() == ["the write limit was not reached: at most 1,500 of 2,000 IOPS"]
    assert leaky.enforcement() == ["the write limit did not hold: 400 IOPS > 200"]
    verdicts = fleet_verdicts([high, best, leaky])
    assert (
        "classes, pgbench tpcb-like, 2 clients: best-effort starved (p99 110.0 ms, 11x high's)"
        in verdicts
    )
    assert not any("leaky starved" in v for v in verdicts)  # 2x is not starving
    doc = best.document()
    assert doc["tps_per_instance"] == {"median": 60.5, "min": 60.0, "max": 61.0}


def test_limits_that_cannot_be_enforced_are_refused_with_the_reason(tmp_path):
    v1 = CgroupSupport("v1", tmp_path, "v1 blkio")
    none = CgroupSupport(None, None, "no cgroup I/O controller is mounted")
    caps = IoLimits(write_iops=100)
    assert limits_problem(IoLimits(), "no block device behind /dev/shm", none) is None
    assert limits_problem(caps, "no block device behind /dev/shm", v1) == (
        "no block device behind /dev/shm"
    )
    from howfast.targets.fleet import FleetDevice

    disk = FleetDevice("vda", "254:0", "mq-deadline")
    assert (
        limits_problem(caps, disk, none)
        == "no cgroup I/O controller: no cgroup I/O controller is mounted"
    )
    assert limits_problem(caps, disk, v1) is None
    weight = limits_problem(IoLimits(weight=100), disk, v1)
    assert weight is not None and "only by the bfq scheduler, and vda uses mq-deadline" in weight
    assert weight_problem("sda", "bfq") is None
    (tmp_path / "block" / "vdb" / "queue").mkdir(parents=True)
    (tmp_path / "block" / "vdb" / "queue" / "scheduler").write_text("none [mq-deadline] bfq\n")
    assert scheduler_of("vdb", tmp_path) == "mq-deadline"


def test_kubernetes_classes_name_a_storage_class_and_are_checked_by_key():
    plan = parse_plan(
        '[fleet]\nclasses = [\n{ name = "high", count = 2, storage_class = "fast-ssd", '
        'volume_attributes_class = "gold" },\n{ name = "be", count = 3 }]\n' + STEP,
        source="f.toml",
    )
    assert plan.fleet is not None
    high, be = plan.fleet.all_scenarios()[0].classes
    assert high.on_kubernetes and not be.on_kubernetes
    assert high.describe() == "StorageClass fast-ssd, attributes gold"
    assert be.describe() == "no limits"
    for text, message in [
        ('[fleet]\nclasses = [{ name = "a", volume_attributes_class = "gold" }]\n',
         r"f\.toml:2: fleet\.classes\[0\]\.volume_attributes_class: .*needs its storage_class"),
        ('[fleet]\nclasses = [{ name = "a", storage_class = "Fast_SSD" }]\n',
         r"fleet\.classes\[0\]\.storage_class"),
    ]:  # fmt: skip
        with pytest.raises(PlanError, match=message):
            parse_plan(text + STEP, source="f.toml")


def test_kubernetes_members_take_their_class_storage_and_refuse_cgroup_limits():
    from howfast.errors import UsageError
    from howfast.targets.k8s import manifests
    from howfast.targets.k8s.fleet import K8sFleet
    from howfast.targets.k8s.spec import K8sOptions, parse_target

    plan = parse_plan(
        '[fleet]\nclasses = [\n{ name = "high", count = 1, storage_class = "fast", '
        'volume_attributes_class = "gold" },\n{ name = "be", count = 2 }]\n' + STEP,
        source="f.toml",
    )
    assert plan.fleet is not None
    scenario = plan.fleet.all_scenarios()[0]
    place = K8sFleet(parse_target("k8s://slow?wal=walclass"), K8sOptions(namespace="bench"),
                     settings={})  # fmt: skip
    members = place.members(scenario, planned=True)
    assert [m.name for m in members] == [
        "k8s://slow?wal=walclass classes/high-1",
        "k8s://slow?wal=walclass classes/be-1",
        "k8s://slow?wal=walclass classes/be-2",
    ]
    assert members[0].fleet_params() == {
        "scenario": "classes", "class": "high", "instance": 1, "storage_class": "fast",
        "volume_attributes_class": "gold",
    }  # fmt: skip
    assert members[1].fleet_params()["storage_class"] == "slow"
    claims = [o for o in members[0].planned().objects if o["kind"] == "PersistentVolumeClaim"]
    by_name = {c["metadata"]["name"].rsplit("-", 1)[1]: c["spec"] for c in claims}
    assert by_name["data"]["storageClassName"] == "fast"
    assert by_name["data"]["volumeAttributesClassName"] == "gold"
    assert by_name["wal"]["storageClassName"] == "walclass"  # the target's WAL class stays
    assert "volumeAttributesClassName" not in by_name["wal"]
    tokens = {c["metadata"]["labels"][manifests.RUN_LABEL] for c in claims}
    assert len(tokens) == 1  # one run label per instance, on all its objects
    capped = parse_plan('[fleet]\nclasses = [{ name = "a", iops = 100 }]\n' + STEP, source="f")
    assert capped.fleet is not None
    with pytest.raises(UsageError, match="cannot cap a pod's I/O"):
        place.check(capped.fleet.all_scenarios())


def test_kubernetes_class_figures_say_the_storage_class_sets_the_limits():
    steps = [_step("high", n, 500.0, 4.0, 100) for n in (1, 2)]
    for step in steps:
        step.params["storage_class"] = "fast"
    steps += [_step("high", 1, 450.0, 5.0, 100, scenario="again")]
    steps[-1].params["storage_class"] = "fast"
    run = RunRecord(1, "fleet", "completed", "a", "b", {}, [], steps)
    figures = fleet_figures(run)
    assert figures[0].storage_class == "fast"
    assert figures[0].enforcement() == [
        "limits are StorageClass fast's: not verifiable from outside the node"
    ]
    verdicts = fleet_verdicts(figures)
    assert verdicts == [
        "high: limits are StorageClass fast's: not verifiable from outside the node"
    ]
    assert figures[0].document()["storage_class"] == "fast"
