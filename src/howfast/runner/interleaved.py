"""An `--until` run: every target's session open at once, and each measuring test repeated in
rounds that alternate the targets (A B, B A, A B ...) until the stopping rule says enough
(analysis/until.py: the width reached, the maximum, a failure, or the test's share of the
budget spent).

Steps that are not repeated (pgbench-init, a warm-up) run once on each target, in the plan's
order, before the tests that follow them. Repetitions are stored like `--repeat`'s (the same
params, `repetition` from 2 on) with the rule in `params.until`, so reports and `compare`
group them alike. Ctrl-C raises Aborted out of a step: the sessions close, the completed
steps stay stored.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence

from howfast.analysis.until import (
    RoundState,
    budget_share,
    figure_widths,
    round_order,
    stop_reason,
)
from howfast.model import StepRecord, StepSpec
from howfast.observer import RunObserver
from howfast.plans.until import Block, UntilRule
from howfast.runner.target_session import TargetSession
from howfast.until_rule import STOPPED_WHY
from howfast.workloads import get_workload


def planned_steps(blocks: Sequence[Block], targets: int, rule: UntilRule) -> int:
    """Steps in the run if every test stops at the minimum: what progress starts from."""
    return sum(targets * (rule.minimum if b.repeated else 1) for b in blocks)


class InterleavedRun:
    def __init__(
        self,
        sessions: Sequence[TargetSession],
        blocks: Sequence[Block],
        rule: UntilRule,
        observer: RunObserver,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sessions = list(sessions)
        self.blocks = list(blocks)
        self.rule = rule
        self.observer = observer
        self.clock = clock
        self.index = 0  # steps run so far, over the whole run
        self.total = planned_steps(blocks, len(sessions), rule)
        self.started = clock()

    def run(self) -> int:
        """Every block on every target; how many steps failed. Always closes the sessions."""
        self.started = self.clock()
        try:
            up = [s for s in self.sessions if s.open()]
            down = [s for s in self.sessions if s not in up]
            tests_left = sum(b.repeated for b in self.blocks)
            for block in self.blocks:
                for session in down:  # its steps are recorded as failed, once each
                    self._step(session, block.spec)
                if not block.repeated:
                    for session in up:
                        self._step(session, block.spec)
                    continue
                remaining = None
                if self.rule.budget_s is not None:
                    remaining = self.rule.budget_s - (self.clock() - self.started)
                share = None if remaining is None else budget_share(remaining, tests_left)
                self._repeat(block.spec, up, share)
                tests_left -= 1
        finally:
            for session in reversed(self.sessions):
                session.close()
        return sum(s.failed for s in self.sessions)

    def _step(self, session: TargetSession, spec: StepSpec) -> StepRecord:
        record = session.run_step(spec, self.index, max(self.total, self.index + 1))
        self.index += 1
        return record

    def _repeat(self, spec: StepSpec, up: list[TargetSession], share_s: float | None) -> None:
        """Rounds of one test on the targets that are up, until the rule stops them."""
        if not up:
            return
        params = {**copy.deepcopy(spec.params), "until": self.rule.params()}
        records: dict[str, list[StepRecord]] = {s.env.target.name: [] for s in up}
        begun = self.clock()
        rounds = 0
        failed = False
        while True:
            rounds += 1
            if rounds > self.rule.minimum:
                self.total += len(up)
            repetition = StepSpec(spec.workload, copy.deepcopy(params), repetition=rounds)
            for position in round_order(len(up), rounds):
                session = up[position]
                record = self._step(session, repetition)
                records[session.env.target.name].append(record)
                failed = failed or record.status != "completed"
            widths = figure_widths(
                spec.workload, spec.params, records, self.rule.ci, self.rule.minimum
            )
            state = RoundState(rounds, failed, self.clock() - begun, share_s)
            reason = stop_reason(state, widths, self.rule.minimum, self.rule.maximum)
            if reason is not None:
                break
        label = get_workload(spec.workload).label(spec.params)
        shown = "; ".join(
            f"{w.metric} "
            + ("no interval" if w.relative is None else f"±{w.relative:.1%}")
            + f" on {w.target}"
            for w in widths
        )
        self.observer.message(
            f"until ci={self.rule.percent}: {label}: {rounds} round(s), stopped: "
            f"{STOPPED_WHY[reason]}" + (f" ({shown})" if shown else "")
        )
