"""Events through the operator (events/operator.py): which actions a cnpg:// target takes,
and whether what the operator did is what was asked (`verdict`, pure). The cnpg:// target is
made but not started (no cluster here): its refusals before start are the operator's to
give at start."""

from __future__ import annotations

from howfast.events import checks
from howfast.events.operator import verdict
from howfast.events.registry import actions
from howfast.plugin.events import parse_event
from howfast.targets.capabilities import OperatorManaged
from howfast.targets.cnpg.spec import parse_target
from howfast.targets.cnpg.target import CnpgTarget
from howfast.targets.k8s.spec import K8sOptions


def target() -> CnpgTarget:
    return CnpgTarget(parse_target("cnpg://lab/pg"), K8sOptions.build())


def test_a_cnpg_target_takes_the_operator_s_actions_and_refuses_the_others() -> None:
    made = target()
    assert isinstance(made, OperatorManaged)
    specs = [parse_event(t) for t in ("5s:delete-pod", "6s:switchover=pg-2")]
    assert checks.refusals(made, specs) == []
    refused = checks.refusals(made, [parse_event("5s:crash"), parse_event("5s:move")])
    assert len(refused) == 2 and "a cnpg:// target is not one" in refused[0]


def test_switchover_is_only_for_targets_an_operator_runs() -> None:
    switchover = actions()["switchover"]
    assert switchover.replaces_primary and switchover.disturbs_service


def test_a_failover_is_verified_by_another_primary_serving_on_a_later_timeline() -> None:
    facts = {"serves": True, "in_recovery_after": False, "old_primary": "pg-1",
             "new_primary": "pg-2", "asked_primary": "pg-2", "timeline_before": 1,
             "timeline_after": 2}  # fmt: skip
    assert verdict("failover", facts) is None
    assert verdict("failover", {**facts, "new_primary": "pg-3"}) == (
        "the operator promoted pg-3, not pg-2"
    )
    assert verdict("delete-pod", {**facts, "asked_primary": None, "new_primary": "pg-1"}) == (
        "the primary is still pg-1"
    )
    assert verdict("switchover", {**facts, "timeline_after": 1}) == (
        "the timeline did not grow (1 → 1)"
    )
    assert verdict("failover", {**facts, "in_recovery_after": True}) is not None
    assert verdict("failover", {"serves": False}) == (
        "no primary served again while the operator was watched"
    )


def test_a_restart_is_verified_by_a_new_postmaster() -> None:
    facts = {"serves": True, "in_recovery_after": False, "old_primary": "pg-1",
             "new_primary": "pg-1", "restarted": True}  # fmt: skip
    assert verdict("restart", facts) is None
    assert verdict("restart", {**facts, "restarted": False}) == (
        "pg-1's server was not restarted (its start time did not change)"
    )
