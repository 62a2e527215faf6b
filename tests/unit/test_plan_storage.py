"""The plan keys of emulated storage ([storage], memory) and rates taken of the run's first
target (rate_basis), with the built-in `latency` plan that uses them."""

from __future__ import annotations

import pytest

from howfast.errors import PlanError, UsageError
from howfast.model import StepRecord
from howfast.plans import expand, load_plan, parse_plan
from howfast.targets.kinds.directory import storage_variants
from howfast.workloads.pgbench.rates import resolve_rate

STEP = """
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [4]
duration = "5s"
"""


def test_storage_section_and_memory():
    plan = parse_plan('memory = "1GiB"\n[storage]\nlatency = ["0", "2ms"]\niops = [0, 500]\n'
                      'size = "1GiB"\n' + STEP, source="s.toml")  # fmt: skip
    assert plan.memory == 2**30
    assert plan.storage is not None and plan.storage.size == 2**30
    names = [v.describe() for v in storage_variants(None, None, plan.storage)]
    assert names == ["+0ms", "+0ms 500 IOPS", "+2ms", "+2ms 500 IOPS"]
    single = parse_plan('[storage]\nlatency = "1ms"\niops = 200\n' + STEP, source="s.toml")
    assert [v.describe() for v in storage_variants(None, None, single.storage)] == ["+1ms 200 IOPS"]
    # The command line wins over the plan.
    assert [v.describe() for v in storage_variants("3ms", None, single.storage)] == ["+3ms"]
    assert storage_variants(None, None, None) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[storage]\nlatency = ["fast"]\n', r"s\.toml:2: storage\.latency\[0\]"),
        ("[storage]\niops = -5\n", r"storage\.iops"),
        ('[storage]\nlatncy = "2ms"\n', r"s\.toml:2: storage\.latncy"),
    ],
)
def test_storage_mistakes_name_the_key_and_line(text: str, message: str):
    with pytest.raises(PlanError, match=message):
        parse_plan(text + STEP, source="s.toml")


def test_rate_basis_needs_rate_fractions():
    with pytest.raises(PlanError, match="rate_basis applies to rate_fractions only"):
        parse_plan(STEP + 'rate_basis = "first-target"\n', source="s.toml")
    specs = expand(
        parse_plan(STEP + 'rate_fractions = [0.7]\nrate_basis = "first-target"\n', source="s")
    )
    assert [s.params.get("rate_basis") for s in specs] == [None, "first-target"]


def _max_step(tps: float) -> StepRecord:
    params = {"mode": "tpcb-like", "clients": 4, "curve_role": "max"}
    return StepRecord("t", "pgbench", params, "completed", "a", "b", metrics={"tps": tps})


def test_a_fraction_of_the_first_targets_maximum():
    params = {"mode": "tpcb-like", "clients": 4, "rate_fraction": 0.7}
    fast, slow = [_max_step(1000.0)], [_max_step(300.0)]
    assert resolve_rate(params, slow, fast) == 210.0  # its own maximum
    first = {**params, "rate_basis": "first-target"}
    assert resolve_rate(first, slow, fast) == 700.0  # the first target's
    with pytest.raises(ValueError, match="on the run's first target"):
        resolve_rate(first, slow, [])


def test_builtin_latency_plan():
    plan = load_plan("latency")
    assert plan.storage is not None and plan.memory is not None
    assert [v.describe() for v in storage_variants(None, None, plan.storage)] == [
        "+0ms 2000 IOPS",
        "+2ms 2000 IOPS",
    ]
    specs = expand(plan)
    assert [s.workload for s in specs] == ["pgbench-init", "pgbench", "pgbench"]
    assert specs[0].params["dataset"] == "on-disk"
    assert specs[2].params["rate_fraction"] == 0.7
    assert specs[2].params["rate_basis"] == "first-target"
    with pytest.raises(UsageError):
        storage_variants("0.5x", None)


def test_added_latency_is_bounded_in_plans_and_on_the_command_line():
    """Issue 26: `--storage-latency 1h` hung in losetup. 100 ms is the most a volume adds."""
    assert [v.describe() for v in storage_variants("0,100ms", None)] == ["+0ms", "+100ms"]
    for text in ("1h", "0,20s", "100.5ms"):
        with pytest.raises(UsageError, match=r"--storage-latency: .* at most 100ms per I/O"):
            storage_variants(text, None)
    with pytest.raises(PlanError, match=r"s\.toml:2: storage\.latency\[1\]: .*at most 100ms"):
        parse_plan('[storage]\nlatency = ["2ms", "0.2s"]\n' + STEP, source="s.toml")
    plan = parse_plan('[storage]\nlatency = "0.1s"\n' + STEP, source="s.toml")
    assert plan.storage is not None and plan.storage.latency == [100.0]
