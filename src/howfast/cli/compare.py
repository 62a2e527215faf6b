"""`howfast compare RUN_A RUN_B [RUN_C...]`: the same tests of several runs side by side."""

from __future__ import annotations

import click

from howfast.analysis import steady
from howfast.analysis.compare import compare_runs, compare_targets
from howfast.analysis.gate import evaluate, parse_threshold
from howfast.analysis.trials import with_slo
from howfast.cli.context import CliEnv, pass_env
from howfast.cli.options import json_option, parse_run_id, slo_option, store_option
from howfast.cli.stores import open_results
from howfast.errors import UsageError
from howfast.report.compare_view import comparison_view
from howfast.service.reading import read_runs
from howfast.slo import FailureSlo


@click.command("compare")
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN_A [RUN_B...]")
@click.option(
    "--fail-if",
    "fail_if",
    multiple=True,
    metavar="'METRIC<-N%'",
    help="A CI gate: exit 1 when a figure is past this change from the first run and the "
    "difference is significant, 3 when that cannot be judged (one repetition); repeatable. "
    "E.g. 'tps<-5%', 'latency_p99_ms>+10%'.",
)
@slo_option
@store_option
@json_option
@pass_env
def compare_command(
    env: CliEnv,
    run_ids: tuple[str, ...],
    fail_if: tuple[str, ...],
    slo: FailureSlo | None,
    store: str | None,
    as_json: bool,
) -> int:
    """Compare runs side by side (or, given one run, its targets): ratios to the first,
    with their 95% interval, and significance.

    Tests are matched by target position, workload and parameters (not repetition).

    For each figure: every run's mean ± 95% confidence interval, the ratio to the baseline,
    and Welch's t-test p-value when both runs have repetitions (significant below 0.05).
    Then what differs in the environments, with a warning when it matters.

    \b
    Example:
      howfast run sweep --target /mnt/a --repeat 3      # run 12
      howfast run sweep --target /mnt/b --repeat 3      # run 14
      howfast compare 12 14
      howfast run quick --target /mnt/a --target /mnt/b --until ci=2%   # run 15
      howfast compare 15                                # /mnt/b against /mnt/a
      howfast compare 12 14 --fail-if 'tps<-5%' --fail-if 'latency_p99_ms>+10%'
    """
    ids = [parse_run_id(r) for r in run_ids]
    thresholds = [parse_threshold(text) for text in fail_if]  # before the store is opened
    db = open_results(env, store, reading=True)
    try:
        runs = read_runs(db, ids, series=steady.SERIES, for_people=not as_json)
    finally:
        db.close()
    runs = [with_slo(run, slo) for run in runs]  # trials judged by the objectives given
    if len(runs) == 1:
        if len(runs[0].targets) < 2:
            raise UsageError(
                f"run {ids[0]} has one target: give two runs or more to compare, or one run "
                "with several targets",
                "e.g. howfast compare 12 14",
            )
        comparison = compare_targets(runs[0])
    else:
        comparison = compare_runs(runs)
    gate = evaluate(comparison, thresholds) if thresholds else None
    if as_json:
        document = comparison.document()
        if gate is not None:
            document["gate"] = gate.document()
        env.print_json(document)
    else:
        env.out.print(comparison_view(comparison))
    if gate is None:
        return 0
    if not as_json:
        for check in gate.checks:
            env.out.print(check.line(), markup=False)
    env.info(gate.summary())
    return gate.exit_status
