"""Derive on read: the verdicts and derived metrics of a run, computed from what was stored.

The store keeps what was measured (the tools' figures, counter deltas, series, histograms)
and what happened at run time (warnings such as "libaio is not available", facts such as the
filesystem type). `derive_run` adds what they mean, with today's rules, to a run as it is
read, whether howfast ran it, imported it, or an older howfast stored it:

- I/O, CPU and PostgreSQL figures of sampled steps, and their warnings (analysis/io.py);
- the wait profile and PostgreSQL's own I/O beside the device's (analysis/why.py, own_io.py);
- replication to the standbys: lags, WAL sent and replayed, the SyncRep share, the commit
  split and the design's bytes written (analysis/replication.py);
- what each workload's own part adds (analysis/hooks.py, declared by its plugin): pgbench's
  rate, objective and curve verdicts, percentile trust, regime warnings and what limited each
  step (workloads/pgbench/analysis.py); fio's trust warnings and commit-rate ceiling
  (workloads/fio/analysis.py);
- whether an emulated volume added the latency asked (analysis/emulation.py);
- that a target on tmpfs measured memory, not storage (analysis/memory_storage.py);
- each target's durability verdict and advice (analysis/durability.py, analysis/advice.py).

Records are not changed: each part returns what it adds, and the derived run is made of new
records (analysis/hooks.py `apply`).

Steps stored before schema 4 (`StepRecord.legacy`) carry such figures frozen at run time:
the ones today's rules can derive again replace them. A derived warning already stored is
not shown twice.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from howfast.analysis import own_io, replication, why
from howfast.analysis.advice import advise
from howfast.analysis.advice_facts import target_advice_facts
from howfast.analysis.design_writes import design_writes
from howfast.analysis.durability_facts import judge_run
from howfast.analysis.emulation import emulation_warning
from howfast.analysis.figures import usable_facts, usable_step
from howfast.analysis.hooks import DeriveContext, Derived, analysis_for, apply
from howfast.analysis.io import analyze_step
from howfast.analysis.memory_storage import MARK, memory_storage_warning
from howfast.model import RunRecord, StepRecord, TargetRecord
from howfast.plugin.registry import expected_seconds, find

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
    """The run with every step's derived metrics, warnings and sections, and every target's
    verdicts; `run` is not changed. A stored figure no rule allows (a negative TPS, NaN,
    1e308, a text) is set aside first, with a warning (analysis/figures.py)."""
    run = replace(
        run,
        environment=usable_facts(run.environment),
        targets=[
            replace(t, device=usable_facts(t.device), client=usable_facts(t.client))
            for t in run.targets
        ],
        steps=[usable_step(s) for s in run.steps],
    )
    imported = {t.name for t in run.targets if t.kind == "import"}
    settings = {t.name: t.settings for t in run.targets}
    done: dict[str, list[StepRecord]] = {}
    steps = []
    for step in run.steps:
        before = done.setdefault(step.target, [])
        derive = partial(
            derive_step,
            before=before,
            imported=step.target in imported,
            target_settings=settings.get(step.target),
        )
        derived = _derived_or_said(step, derive)
        before.append(derived)
        steps.append(derived)
    try:
        steps = _with_run_parts(steps)
        steps = _warn_about_emulation(run, steps)
        steps = _warn_about_memory_storage(run, steps)
    except UNREADABLE as exc:
        steps = [_said(s, "what the run's steps say together", exc) for s in steps]
    out = replace(run, steps=steps)
    try:
        return replace(out, targets=_judge_targets(out))
    except UNREADABLE:  # a device or settings no sampler writes: no verdict rather than none
        return out


# What stored values no sampler or tool writes (a section's "seconds": "fast", a counter of
# 1e308) raise in the derivation, which trusts what howfast stored.
UNREADABLE = (ArithmeticError, ValueError, TypeError, KeyError, IndexError, AttributeError)


def _derived_or_said(step: StepRecord, derive: Callable[[StepRecord], StepRecord]) -> StepRecord:
    """The step derived; if its stored sections hold values that cannot be read, derived
    without them, saying so; if even that fails, as stored, saying so."""
    try:
        return derive(step)
    except UNREADABLE as exc:
        bare = _said(replace(step, sections={}), "its sampled sections", exc)
    try:
        return derive(bare)
    except UNREADABLE as exc:
        return _said(bare, "its figures", exc)


def _said(step: StepRecord, what: str, exc: Exception) -> StepRecord:
    warning = (
        f"{what} hold values howfast does not write ({type(exc).__name__}: {exc}): "
        "left out of what is derived"
    )
    return replace(step, warnings=[*step.warnings, warning])


def _with_run_parts(steps: list[StepRecord]) -> list[StepRecord]:
    """What each workload's steps of the whole run say together (a rate curve's knee)."""
    out = list(steps)
    for workload in dict.fromkeys(s.workload for s in steps):
        positions = [i for i, s in enumerate(steps) if s.workload == workload]
        found = analysis_for(workload).derive_run([out[i] for i in positions])
        for index, derived in found.items():
            out[positions[index]] = apply(out[positions[index]], derived)
    return out


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


def _warn_about_emulation(run: RunRecord, steps: list[StepRecord]) -> list[StepRecord]:
    """An emulated volume that added another latency than asked: said on the target's first
    step, where a reader starts."""
    out = list(steps)
    for target in run.targets:
        warning = emulation_warning(target.device)
        first = next((i for i, s in enumerate(out) if s.target == target.name), None)
        if warning and first is not None and warning not in out[first].warnings:
            out[first] = replace(out[first], warnings=[warning, *out[first].warnings])
    return out


def _warn_about_memory_storage(run: RunRecord, steps: list[StepRecord]) -> list[StepRecord]:
    """A target on tmpfs: said on each of its steps, since every figure it measured is the
    memory's (the fio probes say it themselves)."""
    out = list(steps)
    for target in run.targets:
        warning = memory_storage_warning(target)
        if warning is None:
            continue
        for i, step in enumerate(out):
            if step.target == target.name and not any(MARK in w for w in step.warnings):
                out[i] = replace(step, warnings=[warning, *step.warnings])
    return out


def series_needed(run: RunRecord) -> set[str]:
    """The series the derivation of this run (read without series) reads: TPS around
    checkpoints, the burstiness of each sampled role's writes, and what each workload's part
    reads (the lag of pgbench's fixed-rate steps). Reading only these keeps large stores
    quick to show."""
    names: set[str] = set()
    for step in run.steps:
        postgres = step.sections.get("postgres")
        if isinstance(postgres, dict) and postgres.get("checkpoints"):
            names.add("tps")
        for role, info in _roles(step.sections).items():
            if isinstance(info, dict) and isinstance(info.get("delta"), dict):
                names.add(f"io.{role}.write_mbps")
        names |= analysis_for(step.workload).series_needed(step)
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
    """A new step with what its own data says; `before`: the target's earlier steps,
    derived. The generic parts first (what the samplers saw), then the workload's."""
    out = step
    if step.sections:
        out = _with_io_analysis(out)
        out = _with_why_figures(out)
        # after the primary's own I/O (the design adds to it), before the workload's part
        # (pgbench's verdict reads the lags)
        out = _with_replication_figures(out, target_settings)
    ctx = DeriveContext(imported, target_settings)
    return apply(out, analysis_for(step.workload).derive_step(out, before, ctx))


# -- the generic families of derived figures ---------------------------------------------------


def _with_io_analysis(step: StepRecord) -> StepRecord:
    sections = copy.deepcopy(dict(step.sections))
    if step.legacy:
        for section, keys in IO_SECTION_KEYS.items():
            content = sections.get(section)
            if isinstance(content, dict):
                for key in keys:
                    content.pop(key, None)
        for role in _roles(sections).values():
            if isinstance(role, dict):
                role.pop("summary", None)
    analysis = analyze_step(sections, step.series, _step_seconds(step))
    for name, content in analysis.sections.items():
        _deep_merge(sections.setdefault(name, {}), content)
    per_role = {k for k in step.metrics if k.startswith("io_")}  # io_<role>_<figure>
    metrics = {k: v for k, v in analysis.metrics.items() if v is not None}
    derived = Derived(metrics, frozenset(IO_METRICS | per_role), tuple(analysis.warnings))
    return apply(replace(step, sections=sections), derived)


def _with_why_figures(step: StepRecord) -> StepRecord:
    """The wait profile, and PostgreSQL's own I/O beside the device's."""
    postgres = step.sections.get("postgres")
    if isinstance(postgres, dict):
        profile = why.wait_profile(postgres)
        if profile is not None:
            postgres = {**postgres, **why.profile_sections(profile)}
            derived = Derived(why.profile_metrics(profile), sections={"postgres": postgres})
            step = apply(step, derived)
    io = step.sections.get("io")
    if isinstance(io, dict):
        wal = postgres.get("wal_bytes") if isinstance(postgres, dict) else None
        found = own_io.attribute_io(io, wal if isinstance(wal, int) else None, step.metrics)
        if found is not None:
            io = copy.deepcopy(io)
            _deep_merge(io.setdefault("postgres", {}), found.section)
            # When the tool itself does the I/O (fio), the server's share of the device's
            # says nothing about who else used the disk.
            plugin = find(step.workload)
            warned = tuple(found.warnings) if plugin is None or plugin.io_by_server else ()
            step = apply(step, Derived(found.metrics, warnings=warned, sections={"io": io}))
    return step


def _with_replication_figures(
    step: StepRecord, target_settings: Mapping[str, str] | None
) -> StepRecord:
    """Lags, WAL, the SyncRep share and the commit split of a step on a primary with
    standbys (or with synchronous standbys howfast did not create: SyncRep waits)."""
    plugin = find(step.workload)
    if plugin is None or not plugin.design_figures:
        return step
    postgres = step.sections.get("postgres")
    profile = why.wait_profile(postgres) if isinstance(postgres, Mapping) else None
    idle = profile.idle_share if profile is not None else None
    level = _sync_commit_level(step, target_settings)
    step = apply(step, Derived(replication.replication_metrics(step, idle, level)))
    if replication.replication_section(step.sections) is None:
        return step
    writes = design_writes(step)
    io = step.sections.get("io")
    if not writes.standbys or not isinstance(io, dict):
        return step
    # Which source each standby's writes came from: its device, or its own I/O.
    io = {**copy.deepcopy(io), "standby_writes": writes.standbys}
    return apply(step, Derived(warnings=writes.warnings, sections={"io": io}))


def _sync_commit_level(step: StepRecord, settings: Mapping[str, str] | None) -> str | None:
    """synchronous_commit when commits wait for synchronous standbys, else None."""
    merged = {**(settings or {})}
    step_settings = step.all_params.get("settings")
    if isinstance(step_settings, Mapping):
        merged.update({str(k): str(v) for k, v in step_settings.items()})
    if replication.sync_level(merged) is None:
        return None
    return str(merged.get("synchronous_commit") or "on")


# -- helpers -----------------------------------------------------------------------------------


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
