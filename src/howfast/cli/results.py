"""`howfast results list|show|delete`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from howfast.cli.context import CliEnv, pass_env
from howfast.cli.options import json_option, parse_run_id, slo_option, store_option
from howfast.cli.stores import list_runs, open_results
from howfast.errors import UsageError
from howfast.report.run_list import run_list
from howfast.store.liveness import still_running

if TYPE_CHECKING:  # `results list` needs no SLO; --slo's parser loads it (cli/options.py)
    from howfast.slo import FailureSlo


@click.group("results")
def results_group() -> None:
    """List, show and delete stored runs."""


@results_group.command("list")
@store_option
@json_option
@pass_env
def list_command(env: CliEnv, store: str | None, as_json: bool) -> int:
    """List stored runs, newest first."""
    runs = list_runs(env, store)
    if as_json:
        env.print_json(
            [
                {
                    "id": str(r.id),
                    "plan": r.plan,
                    "label": r.label,
                    "status": r.status,
                    "started_at": r.started_at,
                    "finished_at": r.finished_at,
                    "targets": list(r.targets),
                    "steps": r.step_count,
                }
                for r in runs
            ]
        )
    elif runs:
        env.out.print(run_list(runs))
    else:
        env.info("no runs stored yet: try `howfast run quick --target DIR`")
    return 0


@results_group.command("show")
@click.argument("run_id")
@store_option
@json_option
@click.option(
    "--series", is_flag=True, help="With --json: include per-second series and histograms."
)
@slo_option
@pass_env
def show_command(
    env: CliEnv,
    run_id: str,
    store: str | None,
    as_json: bool,
    series: bool,
    slo: FailureSlo | None,
) -> int:
    """Show one run: its result tables, environment and steps."""
    # Reading and showing a run loads the analysis and every workload's report part, which
    # `results list` and `delete` never need (a command's start-up time is its imports).
    from howfast.analysis import steady
    from howfast.analysis.trials import with_slo
    from howfast.report import terminal
    from howfast.service.reading import read_run, run_document

    rid = parse_run_id(run_id)
    db = open_results(env, store, reading=True)
    try:
        # The steady-state figures of the tables need their series.
        wanted = () if as_json else steady.SERIES
        run = read_run(db, rid, series=wanted, all_series=series, for_people=not as_json)
    finally:
        db.close()
    if run is None:
        raise UsageError(f"no run {rid} in the store", "see `howfast results list`")
    run = with_slo(run, slo)  # its trials judged by the objectives given
    if as_json:
        env.print_json(run_document(run, with_series=series))
    else:
        env.out.print(terminal.run_details(run))
    return 0


@results_group.command("delete")
@click.argument("run_id")
@click.option(
    "--force",
    is_flag=True,
    help="Delete a run marked running whose howfast cannot be seen from here (another host "
    "or container, or a run that does not say which process writes it). A run whose howfast "
    "is alive on this machine is still refused.",
)
@store_option
@pass_env
def delete_command(env: CliEnv, run_id: str, force: bool, store: str | None) -> int:
    """Delete a run and everything stored with it."""
    rid = parse_run_id(run_id)
    db = open_results(env, store)
    try:
        # Its writer would fail at its next step: refuse while it runs (the runs whose
        # howfast is gone were just marked aborted by open_results).
        running = still_running(db, rid)
        if running and not (force and running.unknown):
            hint = (
                "if you know that nothing writes it any more, delete it with --force"
                if running.unknown
                else "wait until it ends, or interrupt it (Ctrl-C, or kill -INT its PID), "
                "then delete it"
            )
            raise UsageError(f"{running}: deleting it would make its next step fail", hint)
        deleted = db.delete_run(rid)
    finally:
        db.close()
    if not deleted:
        raise UsageError(f"no run {rid} in the store", "see `howfast results list`")
    env.info(f"deleted run {rid}" + (" (it was marked running)" if running else ""))
    return 0
