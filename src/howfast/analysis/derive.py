"""Derive on read: the verdicts and derived metrics of a run, computed from what was stored.

The store keeps what was measured (the tools' figures, counter deltas, series, histograms)
and what happened at run time (warnings such as "libaio is not available", facts such as the
filesystem type). `derive_run` adds what they mean, with today's rules, to a run as it is
read, whether howfast ran it, imported it, or an older howfast stored it:

- I/O, CPU and PostgreSQL figures of sampled steps, and their warnings (analysis/io.py);
- rate, objective and curve verdicts of fixed-rate pgbench steps (analysis/rate_verdicts.py);
- whether an "on-disk" step read the disk (analysis/working_set.py);
- latency percentiles from too few transactions to be bounded (analysis/percentiles.py);
- what each workload's own part adds (analysis/hooks.py): fio's trust warnings and
  commit-rate ceiling (workloads/fio/analysis.py);
- whether an emulated volume added the latency asked (analysis/emulation.py);
- that a target on tmpfs measured memory, not storage (analysis/memory_storage.py);
- the wait profile, PostgreSQL's own I/O and what limited each pgbench step (analysis/why.py);
- each target's durability verdict and advice (analysis/durability.py, analysis/advice.py).

Steps stored before schema 4 (`StepRecord.legacy`) carry such figures frozen at run time:
the ones today's rules can derive again replace them. A derived warning already stored is
not shown twice.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from howfast.analysis import own_io, percentiles, rate_verdicts, replication, why
from howfast.analysis.advice import advise
from howfast.analysis.advice_facts import target_advice_facts
from howfast.analysis.durability_facts import judge_run
from howfast.analysis.emulation import emulation_warning
from howfast.analysis.hooks import DeriveContext, analysis_for
from howfast.analysis.io import analyze_step
from howfast.analysis.memory_storage import MARK, memory_storage_warning
from howfast.analysis.working_set import regime_warnings
from howfast.model import JSONValue, RunRecord, StepRecord, TargetRecord
from howfast.plugin.registry import expected_seconds

# What analysis/io.py adds, to be replaced in legacy steps.
IO_METRICS = frozenset(
    {
        "io_write_amplification",
        "wal_records",
        "wal_fpi",
        "wal_bytes",
        "cache_hit_ratio",
        "checkpoints",
        "tps_during_checkpoints",
        "tps_outside_checkpoints",
        "cpu_user_pct",
        "cpu_system_pct",
        "cpu_iowait_pct",
        "cpu_steal_pct",
        "page_cache_bytes",
        "pgbench_cpu_pct",
        "pgbench_thread_cpu_max_pct",
    }
)
IO_SECTION_KEYS = {
    "io": ("write_amplification", "device_write_bytes"),
    "postgres": (
        "cache_hit_ratio",
        "checkpoints_source",
        "checkpoint_count",
        "tps_during_checkpoints",
        "tps_outside_checkpoints",
    ),
}


def derive_run(run: RunRecord) -> RunRecord:
    """The run with every step's derived metrics, warnings and sections; `run` is not
    changed."""
    imported = {t.name for t in run.targets if t.kind == "import"}
    settings = {t.name: t.settings for t in run.targets}
    done: dict[str, list[StepRecord]] = {}
    steps = []
    for step in run.steps:
        before = done.setdefault(step.target, [])
        derived = derive_step(
            step,
            before,
            imported=step.target in imported,
            target_settings=settings.get(step.target),
        )
        before.append(derived)
        steps.append(derived)
    _summarise_curves(steps)
    _warn_about_emulation(run, steps)
    _warn_about_memory_storage(run, steps)
    out = replace(run, steps=steps)
    return replace(out, targets=_judge_targets(out))


def _judge_targets(run: RunRecord) -> list[TargetRecord]:
    """Each target with its durability verdict and the advice its steps support
    (analysis/durability.py, analysis/advice.py; docs/why.md)."""
    verdicts = judge_run(run)
    targets = []
    for target in run.targets:
        verdict = verdicts[target.name]
        own = [s for s in run.steps if s.target == target.name]
        found = advise(target_advice_facts(target, own, run.environment, verdict))
        derived = {"durability": verdict.document(), "advice": [a.document() for a in found]}
        targets.append(replace(target, derived={**target.derived, **derived}))
    return targets


def _warn_about_emulation(run: RunRecord, steps: list[StepRecord]) -> None:
    """An emulated volume that added another latency than asked: said on the target's first
    step, where a reader starts."""
    for target in run.targets:
        warning = emulation_warning(target.device)
        first = next((s for s in steps if s.target == target.name), None)
        if warning and first is not None and warning not in first.warnings:
            first.warnings.insert(0, warning)


def _warn_about_memory_storage(run: RunRecord, steps: list[StepRecord]) -> None:
    """A target on tmpfs: said on each of its steps, since every figure it measured is the
    memory's (the fio probes say it themselves)."""
    for target in run.targets:
        warning = memory_storage_warning(target)
        if warning is None:
            continue
        for step in steps:
            if step.target == target.name and not any(MARK in w for w in step.warnings):
                step.warnings.insert(0, warning)


def series_needed(run: RunRecord) -> set[str]:
    """The series the derivation of this run (read without series) reads: TPS around
    checkpoints, the burstiness of each sampled role's writes, the lag of fixed-rate steps.
    Reading only these keeps large stores quick to show."""
    names: set[str] = set()
    for step in run.steps:
        postgres = step.sections.get("postgres")
        if isinstance(postgres, dict) and postgres.get("checkpoints"):
            names.add("tps")
        for role, info in _roles(step.sections).items():
            if isinstance(info, dict) and isinstance(info.get("delta"), dict):
                names.add(f"io.{role}.write_mbps")
        if step.workload == "pgbench" and step.all_params.get("rate") is not None:
            names.add("lag_ms")
        names |= replication.series_names(step.sections)
    return names


def derive_last(steps: Sequence[StepRecord]) -> StepRecord:
    """The last of a target's steps, derived with the ones before it (what the runner shows as
    a step ends; a curve's summary comes when the run is read)."""
    return derive_step(steps[-1], steps[:-1])


def derive_step(
    step: StepRecord,
    before: Sequence[StepRecord],
    *,
    imported: bool = False,
    target_settings: Mapping[str, str] | None = None,
) -> StepRecord:
    """One step with what its own data says; `before`: the target's earlier steps, derived."""
    out = replace(
        step,
        metrics=dict(step.metrics),
        warnings=list(step.warnings),
        sections=copy.deepcopy(step.sections),
    )
    if step.sections:
        _add_io_analysis(out)
        _add_why_figures(out, target_settings)
    if step.workload == "pgbench" and step.status == "completed":
        _add_percentile_trust(out)
        _add_rate_verdicts(out)
        _add_regime_warnings(out, before)
        _add_verdict(out, before, target_settings)
    ctx = DeriveContext(imported, target_settings)
    derived = analysis_for(step.workload).derive_step(step, before, ctx)
    _add(out, derived.metrics, derived.owned)
    _warn(out, derived.warnings)
    return out


# -- the families of derived figures -----------------------------------------------------------


def _add_io_analysis(step: StepRecord) -> None:
    if step.legacy:
        for section, keys in IO_SECTION_KEYS.items():
            content = step.sections.get(section)
            if isinstance(content, dict):
                for key in keys:
                    content.pop(key, None)
        for role in _roles(step.sections).values():
            if isinstance(role, dict):
                role.pop("summary", None)
    analysis = analyze_step(step.sections, step.series, _step_seconds(step))
    for name, content in analysis.sections.items():
        _deep_merge(step.sections.setdefault(name, {}), content)
    per_role = {k for k in step.metrics if k.startswith("io_")}  # io_<role>_<figure>
    _add(step, {k: v for k, v in analysis.metrics.items() if v is not None}, IO_METRICS | per_role)
    _warn(step, analysis.warnings)


def _sync_commit_level(step: StepRecord, settings: Mapping[str, str] | None) -> str | None:
    """synchronous_commit when commits wait for synchronous standbys, else None."""
    merged = {**(settings or {})}
    step_settings = step.all_params.get("settings")
    if isinstance(step_settings, Mapping):
        merged.update({str(k): str(v) for k, v in step_settings.items()})
    if replication.sync_level(merged) is None:
        return None
    return str(merged.get("synchronous_commit") or "on")


def _add_why_figures(step: StepRecord, target_settings: Mapping[str, str] | None = None) -> None:
    """The wait profile, and PostgreSQL's own I/O beside the device's."""
    postgres = step.sections.get("postgres")
    if isinstance(postgres, dict):
        profile = why.wait_profile(postgres)
        if profile is not None:
            postgres.update(why.profile_sections(profile))
            _add(step, why.profile_metrics(profile), set())
    io = step.sections.get("io")
    if isinstance(io, dict):
        wal = postgres.get("wal_bytes") if isinstance(postgres, dict) else None
        found = own_io.attribute_io(io, wal if isinstance(wal, int) else None, step.metrics)
        if found is not None:
            _deep_merge(io.setdefault("postgres", {}), found.section)
            _add(step, found.metrics, set())
            # In a fio step the tool, not the server, does the I/O: the server's share says
            # nothing about who else used the disk.
            _warn(step, found.warnings if step.workload != "fio" else [])
    if step.workload == "pgbench":  # after the primary's own I/O: the design adds to it
        profile = why.wait_profile(postgres) if isinstance(postgres, dict) else None
        idle = profile.idle_share if profile is not None else None
        level = _sync_commit_level(step, target_settings)
        _add(step, replication.replication_metrics(step, idle, level), set())


def _add_verdict(
    step: StepRecord, before: Sequence[StepRecord], settings: Mapping[str, str] | None
) -> None:
    """What limited the step (docs/why.md), in its `why` section."""
    if step.all_params.get("warmup") is True:
        return
    verdict = why.decide(why.step_facts(step, before, settings))
    step.sections["why"] = verdict.section()


def _add_percentile_trust(step: StepRecord) -> None:
    """Percentiles from too few transactions to bound them (analysis/percentiles.py)."""
    short = percentiles.too_few_samples(step.metrics)
    if short:
        _add(step, {percentiles.SHORT_METRIC: list(short)}, set())
    warning = percentiles.too_few_warning(step.metrics, short)
    _warn(step, [warning] if warning else [])


def _add_rate_verdicts(step: StepRecord) -> None:
    params = step.all_params
    verdicts = rate_verdicts.step_rate_metrics(params, step.metrics, step.series.get("lag_ms", []))
    _add(step, verdicts, rate_verdicts.RATE_METRICS)
    warning = rate_verdicts.rate_warning(params, verdicts)
    _warn(step, [warning] if warning else [])


def _add_regime_warnings(step: StepRecord, before: Sequence[StepRecord]) -> None:
    params = step.all_params
    if params.get("warmup"):
        return
    load = next((s for s in reversed(before) if s.workload == "pgbench-init"), None)
    if load is None or load.status != "completed":
        return
    size = load.metrics.get("db_size_bytes")
    dataset = params.get("dataset")
    _warn(
        step,
        regime_warnings(
            str(dataset) if dataset is not None else None,
            size if isinstance(size, int) else None,
            step.metrics,
            step.sections,
        ),
    )


def _summarise_curves(steps: list[StepRecord]) -> None:
    """A curve's saturation point, knee and highest rate meeting the objective, on its last
    step: the one the plan marked (`curve_last`), or for curves howfast did not plan
    (imports), the last fixed-rate step of the curve."""
    curves: dict[tuple[str, str], list[StepRecord]] = {}
    for step in steps:
        if rate_verdicts.in_curve(step):
            curves.setdefault((step.target, rate_verdicts.curve_key(step.all_params)), []).append(
                step
            )
    for members in curves.values():
        planned = any("curve_role" in s.all_params or "curve_last" in s.all_params for s in members)
        rated = [s for s in members if isinstance(s.all_params.get("rate"), int | float)]
        rated_ids = {id(s) for s in rated}
        for index, step in enumerate(members):
            last = step.all_params.get("curve_last") is True if planned else step is rated[-1]
            if not last or step.status != "completed" or (not planned and len(rated) < 2):
                continue
            points = [
                (s.all_params, s.metrics)
                for s in members[:index]
                if s.status == "completed" and id(s) in rated_ids
            ]
            points.append((step.all_params, step.metrics))
            _add(step, rate_verdicts.curve_metrics(points), rate_verdicts.CURVE_METRICS)


# -- helpers -----------------------------------------------------------------------------------


def _add(
    step: StepRecord,
    derived: Mapping[str, JSONValue] | None,
    owned: frozenset[str] | set[str],
) -> None:
    """Derived figures join the step's metrics; the tool's own figures win. None: the rule
    could not be applied, so a legacy step keeps what it stored."""
    if derived is None:
        return
    if step.legacy:  # frozen figures give way to today's, or go when today's rules say none
        for key in owned:
            step.metrics.pop(key, None)
    for key, value in derived.items():
        step.metrics.setdefault(key, value)


def _warn(step: StepRecord, warnings: Sequence[str]) -> None:
    step.warnings.extend(w for w in warnings if w not in step.warnings)


def _roles(sections: Mapping[str, Any]) -> Mapping[str, Any]:
    io = sections.get("io")
    roles = io.get("roles") if isinstance(io, dict) else None
    return roles if isinstance(roles, dict) else {}


def _step_seconds(step: StepRecord) -> float:
    """The step's length as the samplers' figures are judged by: the planned duration when
    known, else how long the samplers ran."""
    planned = expected_seconds(step.workload, step.all_params)
    if planned:
        return planned
    io = step.sections.get("io") or {}
    if isinstance(io.get("sampled_s"), int | float):
        return float(io["sampled_s"])
    # Steps stored before `sampled_s`: the longest a sampler counted.
    seconds = [r.get("seconds") for r in _roles(step.sections).values() if isinstance(r, dict)]
    postgres = step.sections.get("postgres") or {}
    seconds.append(postgres.get("seconds"))
    numbers = [float(s) for s in seconds if isinstance(s, int | float)]
    return max(numbers, default=0.0)


def _deep_merge(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = value
