"""Turning a validated plan (and the command line's overrides) into the list of steps to run.

Pure: no I/O, no clock, no CPU count. What can only be known on the machine that runs the step
(pgbench's thread count when the plan leaves it open) stays None for the runner to resolve.
The params dicts are the stable JSON contract described in docs/plans/format.md.
"""

from __future__ import annotations

import copy

from howfast.model import JSONValue, StepSpec
from howfast.plans.model import (
    FioStep,
    Overrides,
    PgbenchInitStep,
    PgbenchStep,
    PgTestFsyncStep,
    Plan,
    SeqreadStep,
)


def expand(plan: Plan, overrides: Overrides | None = None) -> list[StepSpec]:
    """The steps of `plan` in order. Within a pgbench step: for each mode, for each client
    count, each repetition. Measuring steps run `repeat` times; pgbench-init runs once."""
    overrides = overrides or Overrides()
    repeat = overrides.repeat or plan.repeat
    # The scale pgbench steps record: the override, else the latest pgbench-init above them.
    scale = overrides.scale
    specs: list[StepSpec] = []
    for step in plan.steps:
        if isinstance(step, PgbenchInitStep):
            # --scale and --dataset each replace both keys. The scale of a dataset is computed
            # on the target; the runner then records it in the steps that follow.
            dataset = None if overrides.scale else overrides.dataset or step.dataset
            scale = None if dataset else overrides.scale or step.scale
            specs.append(StepSpec("pgbench-init", _init_params(step, scale, dataset)))
        elif isinstance(step, PgbenchStep):
            specs += _pgbench_specs(step, overrides, scale, repeat)
        elif isinstance(step, FioStep):
            for profile in step.profiles:
                specs += _repeated("fio", repeat, profile=profile, size_bytes=step.size,
                                   runtime_s=int(step.runtime))  # fmt: skip
        elif isinstance(step, PgTestFsyncStep):
            specs += _repeated("pg_test_fsync", repeat, seconds=step.seconds)
        elif isinstance(step, SeqreadStep):
            known: dict[str, JSONValue] = {"scale": scale} if scale is not None else {}
            specs += _repeated("seqread", repeat, cold=step.cold, parallel=step.parallel, **known)
    return specs


def effective_settings(plan: Plan, overrides: Overrides | None = None) -> dict[str, str]:
    """postgresql.conf settings for a cluster howfast creates: the plan's, then `--set`."""
    return {**plan.settings, **(overrides.settings if overrides else {})}


def _repeated(workload: str, repeat: int, **params: JSONValue) -> list[StepSpec]:
    # A fresh copy per spec: a consumer that edits one step's params must not edit another's.
    return [StepSpec(workload, copy.deepcopy(params), repetition=r) for r in range(1, repeat + 1)]


def _init_params(
    step: PgbenchInitStep, scale: int | None, dataset: str | None
) -> dict[str, JSONValue]:
    params: dict[str, JSONValue] = {"dataset": dataset} if dataset else {"scale": scale}
    params |= {
        "generate": step.generate,
        "fillfactor": step.fillfactor,
        "partitions": step.partitions,
    }
    if step.partitions > 0:
        params["partition_method"] = step.partition_method
    if step.extra_args:
        params["extra_args"] = list(step.extra_args)
    return params


def _pgbench_specs(
    step: PgbenchStep, overrides: Overrides, scale: int | None, repeat: int
) -> list[StepSpec]:
    # --modes replaces built-in modes; a step of custom scripts stays what it is.
    if step.scripts is not None:
        variants: list[tuple[str, list[str] | None]] = [("custom", list(step.scripts))]
    else:
        variants = [(mode, None) for mode in (overrides.modes or step.modes or [])]
    # --duration replaces the length of every pgbench step, including one given in transactions.
    duration = overrides.duration_s or step.duration
    transactions = None if overrides.duration_s else step.transactions

    specs = []
    for mode, scripts in variants:
        measured: list[StepSpec] = []
        for clients in overrides.clients or step.clients:
            params: dict[str, JSONValue] = {"mode": mode}
            if scripts is not None:
                params["scripts"] = scripts
            params["clients"] = clients
            # pgbench never uses more threads than clients; record what it will really use.
            params["jobs"] = min(step.jobs, clients) if step.jobs else None
            if duration is not None:
                params["duration_s"] = int(duration)
            else:
                params["transactions"] = transactions
            if scale is not None:
                params["scale"] = scale
            slo = overrides.slo or step.slo
            if slo is not None:
                params["slo"] = slo
            if step.latency_limit is not None:
                params["latency_limit_ms"] = round(step.latency_limit * 1000, 6)
            if step.protocol is not None:
                params["protocol"] = step.protocol
            if step.extra_args:
                params["extra_args"] = list(step.extra_args)
            if step.settings:
                params["settings"] = dict(step.settings)
            for rate_params in _rate_variants(step, overrides):
                runs = _repeated("pgbench", repeat, **params, **rate_params)
                for earlier in runs[:-1]:  # the curve is complete after its very last run
                    earlier.params.pop("curve_last", None)
                measured += runs
        specs += _warmup(step, measured) + measured
    return specs


def _warmup(step: PgbenchStep, measured: list[StepSpec]) -> list[StepSpec]:
    """One run of `warmup` seconds before a mode's measurements, at its largest client count
    (it fills the caches fastest). `warmup: true` in its params keeps it out of statistics."""
    if step.warmup is None or not measured:
        return []
    widest = max(measured, key=lambda spec: int(spec.params.get("clients") or 0))
    params = copy.deepcopy(widest.params)
    params.pop("transactions", None)
    params["duration_s"] = int(step.warmup)
    params["warmup"] = True
    return [StepSpec("pgbench", params)]


def _rate_variants(step: PgbenchStep, overrides: Overrides) -> list[dict[str, JSONValue]]:
    """What is offered to pgbench for one client count: nothing (full speed), one fixed rate,
    or a curve. A curve of fractions starts with a full-speed run (`curve_role: max`) whose
    TPS the fractions are taken of at run time; the last point of a curve is marked, so the
    curve's saturation point and knee can be stored with it."""
    if overrides.rate is not None:
        return [{"rate": overrides.rate}]
    rates = overrides.rates or step.rates
    if rates:
        variants: list[dict[str, JSONValue]] = [{"rate": r} for r in rates]
    elif step.rate_fractions and not overrides.rates:
        variants = [{"curve_role": "max"}] + [{"rate_fraction": f} for f in step.rate_fractions]
    elif step.rate is not None:
        return [{"rate": step.rate}]
    else:
        return [{}]
    if len(variants) > 1:
        variants[-1]["curve_last"] = True
    return variants
