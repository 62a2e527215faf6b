"""Plans that size data by regime: the `dataset` key, --dataset, seqread steps, and the
built-in `regimes` plan."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from howfast.errors import PlanError, UsageError
from howfast.model import StepSpec
from howfast.plans import Overrides, builtin_plan_text, expand, load_plan

INIT_DEFAULTS = {"generate": "client", "fillfactor": 100, "partitions": 0}


def plan_file(tmp_path: Path, steps: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(steps)
    return path


def test_dataset_replaces_scale_and_later_steps_wait_for_the_loaded_scale(tmp_path: Path):
    path = plan_file(
        tmp_path,
        '[[steps]]\nworkload = "pgbench-init"\ndataset = "on-disk"\n'
        '[[steps]]\nworkload = "seqread"\n'
        '[[steps]]\nworkload = "pgbench"\nmodes = ["tpcb-like"]\nclients = 2\nduration = 5\n',
    )
    init, read, bench = expand(load_plan(str(path)))
    assert init == StepSpec("pgbench-init", {"dataset": "on-disk", **INIT_DEFAULTS})
    assert read == StepSpec("seqread", {"cold": True, "parallel": False})
    assert "scale" not in bench.params  # the runner records the scale that was loaded


def test_dataset_override_and_scale_override(tmp_path: Path):
    plan = load_plan("quick")
    sized = expand(plan, Overrides(dataset="20GiB"))
    inits = [s for s in sized if s.workload == "pgbench-init"]
    assert inits == [StepSpec("pgbench-init", {"dataset": "20GiB", **INIT_DEFAULTS})]
    assert all("scale" not in s.params for s in sized if s.workload == "pgbench")
    # --scale replaces a plan's dataset, and the scale is then known to every step.
    regimes = expand(load_plan("regimes"), Overrides(scale=3))
    assert {s.params.get("scale") for s in regimes} == {3}
    assert all("dataset" not in s.params for s in regimes)


def test_dataset_override_is_checked():
    with pytest.raises(UsageError, match="--scale or --dataset"):
        Overrides(scale=3, dataset="on-disk")
    with pytest.raises(UsageError, match="in-buffers, in-memory, on-disk or a size"):
        Overrides(dataset="on-disc")


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ('scale = 3\ndataset = "on-disk"', "give scale or dataset, not both"),
        ("generate = 'client'", "missing scale (or dataset)"),
        ('dataset = "lots"', "expected in-buffers, in-memory, on-disk or a size"),
    ],
)
def test_bad_dataset_keys_are_plan_errors(tmp_path: Path, step: str, message: str):
    path = plan_file(tmp_path, f'[[steps]]\nworkload = "pgbench-init"\n{step}\n')
    with pytest.raises(PlanError, match=r"p\.toml:\d+"):
        load_plan(str(path))
    with pytest.raises(PlanError) as caught:
        load_plan(str(path))
    assert message in str(caught.value)


def test_seqread_step_keys(tmp_path: Path):
    path = plan_file(
        tmp_path,
        'repeat = 2\n[[steps]]\nworkload = "pgbench-init"\nscale = 5\n'
        '[[steps]]\nworkload = "seqread"\ncold = false\nparallel = true\n',
    )
    reads = [s for s in expand(load_plan(str(path))) if s.workload == "seqread"]
    params = {"cold": False, "parallel": True, "scale": 5}
    assert reads == [StepSpec("seqread", params, 1), StepSpec("seqread", params, 2)]
    bad = plan_file(tmp_path, '[[steps]]\nworkload = "seqread"\ncold = "yes"\n')
    with pytest.raises(PlanError, match="cold"):
        load_plan(str(bad))


def test_builtin_regimes_plan():
    text = builtin_plan_text("regimes")
    assert text.startswith("# regimes: ") and "How long:" in text
    assert tomllib.loads(text)["description"] == load_plan("regimes").description
    steps = expand(load_plan("regimes"))
    kinds = [(s.workload, s.params.get("dataset"), s.params.get("warmup")) for s in steps]
    assert kinds == [
        ("pgbench-init", "on-disk", None),
        ("seqread", None, None),
        ("pgbench", None, True),
        ("pgbench", None, None),
        ("pgbench-init", "in-memory", None),
        ("pgbench", None, True),
        ("pgbench", None, None),
    ]
    measured = [s.params for s in steps if s.workload == "pgbench" and not s.params.get("warmup")]
    # On-disk and in-memory TPS: the same transactions, clients and duration.
    assert measured[0] == measured[1]
    assert measured[0]["mode"] == "tpcb-like"
