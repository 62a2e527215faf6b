"""The run service's prepare step (service/run.py): the one ETA rule, the refusals before
anything is created, the dry run's document; on directories that stay untouched (nothing
runs: no cluster, no lock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.errors import UsageError
from howfast.plugin.overrides import Overrides
from howfast.service.env import ServiceEnv
from howfast.service.requests import ProbeRequest, RunRequest, TargetRunOptions, UntilOptions
from howfast.service.run import RunService
from tests.conftest import pg_bindir

pytestmark = pytest.mark.skipif(pg_bindir() is None, reason="no PostgreSQL installed")

# pgbench-init at scale 1 is expected to take 2.3 s, a 10 s pgbench step 10 s and a seqread
# step declares nothing: UNKNOWN_STEP_S (5 s).
PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1, 2]
duration = "10s"
[[steps]]
workload = "seqread"
"""


@pytest.fixture
def service() -> RunService:
    said: list[str] = []
    return RunService(ServiceEnv(environ={}, info=said.append))


@pytest.fixture
def plan(tmp_path: Path) -> str:
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    return str(path)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[str, str]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    return str(a), str(b)


def test_the_eta_of_a_run_is_each_step_on_each_target(service, plan, dirs) -> None:
    prepared = service.prepare(RunRequest(plan, dirs, dry_run=True))
    assert prepared.shape == "sequential" and prepared.total_steps == 8
    assert prepared.expected_s == pytest.approx((2.3 + 10 + 10 + 5) * 2)
    assert all(not any(Path(d).iterdir()) for d in dirs)  # nothing created in them


def test_an_until_run_ends_by_its_budget_at_the_latest(service, plan, dirs) -> None:
    asked = RunRequest(plan, dirs, until=UntilOptions("ci=5%", "30s"), dry_run=True)
    prepared = service.prepare(asked)
    assert prepared.shape == "interleaved"
    # The steps listed are each test's first 3 rounds: (2.3 + 3 x (10 + 10 + 5)) x 2 = 154.6
    assert prepared.expected_s == 30.0
    unbounded = service.prepare(RunRequest(plan, dirs, until=UntilOptions("ci=5%"), dry_run=True))
    assert unbounded.expected_s == pytest.approx((2.3 + 3 * 25) * 2)
    document = unbounded.dry_run_document()
    assert document["until"]["text"] == "ci=5%"
    assert len(document["targets"]) == 2


def test_a_fleet_counts_its_scenarios_not_its_instances(service, dirs) -> None:
    prepared = service.prepare(RunRequest("fleet", dirs[:1], dry_run=True))
    assert prepared.shape == "fleet" and prepared.fleet is not None
    assert len(prepared.fleet.scenarios) == 3
    assert prepared.total_steps == 3 * 8 * 3  # 8 instances a scenario, 3 steps each
    # the built-in fleet plan: a load at scale 1 (2.3 s) and two 10 s pgbench steps, side by
    # side on the 8 instances of each of its 3 scenarios
    assert prepared.expected_s == pytest.approx(3 * (2.3 + 10 + 10))
    # its dry run lists every instance of every scenario, planned
    assert len(prepared.dry_run_document()["targets"]) == 24


def test_the_probe_eta_is_its_tools_declared_durations(service, dirs) -> None:
    request = ProbeRequest(dirs[0], ("wal-fsync", "pg_test_fsync"), runtime_s=10, dry_run=True)
    prepared = service.prepare_probe(request)
    assert prepared.plan_name == "probe" and prepared.total_steps == 2
    # fio's 10 s with its ramp (11 s), pg_test_fsync's ~16 tests of 2 s (32 s)
    assert prepared.expected_s == pytest.approx(11.0 + 32.0)
    document = prepared.dry_run_document()  # the probe's own --json shape
    assert document["directory"] == dirs[0]
    assert [s["workload"] for s in document["steps"]] == ["fio", "pg_test_fsync"]
    assert "jobfile" in document["steps"][0]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (RunRequest("quick", ()), "give at least one --target"),
        (
            RunRequest("fleet", ("/tmp",), until=UntilOptions("ci=2%")),
            "--until does not apply to a [fleet] plan",
        ),
        (
            RunRequest("quick", ("k8s://fast",), until=UntilOptions("ci=2%")),
            "--until is not supported with k8s:// targets",
        ),
        (
            RunRequest("probe-free", ("/tmp",), overrides=Overrides(dataset="in-memory")),
            "loads no data",
        ),
        (
            RunRequest(
                "quick",
                ("/tmp",),
                target_options=TargetRunOptions(kind_values={"namespace": "bench"}),
            ),
            "--namespace: for k8s:// and cnpg:// targets only",
        ),
        (RunRequest("fleet", ("/tmp",), target_options=TargetRunOptions(keep=True)), "--keep"),
        (  # refused by the directory kind (targets/kinds/directory.py), not the service
            RunRequest(
                "fleet",
                ("/tmp",),
                target_options=TargetRunOptions(kind_values={"storage_latency": "1ms"}),
            ),
            "a fleet plan cannot be combined with --storage-latency",
        ),
        (
            RunRequest("fleet", ("/tmp", "/var/tmp")),
            "a fleet runs on one target: a directory .* or a k8s:// StorageClass",
        ),
    ],
)
def test_what_cannot_run_is_refused_before_anything_exists(
    service, request_: RunRequest, message: str, tmp_path: Path
) -> None:
    if request_.plan == "probe-free":  # a plan without a pgbench-init step
        path = tmp_path / "probe-free.toml"
        path.write_text('[[steps]]\nworkload = "fio"\nprofiles = ["wal-fsync"]\n')
        request_ = RunRequest(str(path), request_.targets, overrides=request_.overrides)
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        service.prepare(request_)


def test_the_run_service_and_the_runner_look_up_no_attribute_by_name() -> None:
    """What a target (or anything else) can do is asked with isinstance on a capability, not
    with getattr/hasattr: in the whole of service/ and runner/ (test_target_kinds checks
    runner/ and the dry run; this adds the run service, the probe and reading)."""
    import ast

    import howfast

    root = Path(howfast.__file__).parent
    files = sorted([*(root / "service").glob("*.py"), *(root / "runner").glob("*.py")])
    found = [
        f"{path.relative_to(root)}:{node.lineno}"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr", "setattr")
    ]
    assert len(files) > 15 and found == []
