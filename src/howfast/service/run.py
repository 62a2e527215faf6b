"""The run service: a run of a plan (`howfast run`, a `[fleet]` plan's run, `howfast probe`)
from a typed request to a stored run, in two moves.

- `prepare(request)` decides everything and creates nothing: the plan loaded and expanded,
  the install, the targets (or the fleet's place), the `--until` rule, the ETA. Every usage
  error is raised here, so that `--dry-run` refuses what a run would. A run that is not a
  dry run first has the kinds present tidy what killed runs left (empty cgroups).
- `execute(prepared, observer)` runs it: the store
  (closing the runs a killed howfast left), live metrics, the Runner or FleetRunner (which
  install the signal handlers: runner/run.py `record_run`), and closes them whatever happens;
  it returns the stored run, derived.

The CLI parses options into a request (service/requests.py), prints the dry run or makes the
progress display, and prints the finished run; it decides nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from howfast.design import DesignOptions, merge_design
from howfast.errors import UsageError
from howfast.machine.memory import cap_floor_problem, memory_basis
from howfast.machine.pgbin import PgInstall
from howfast.model import StepRecord, StepSpec
from howfast.observer import RunObserver, StepRef
from howfast.plans import Overrides, Plan, effective_settings, expand, load_plan
from howfast.plans.expand import expand_blocks
from howfast.plans.fleet import FleetScenario
from howfast.plans.load import setting_locations
from howfast.plans.until import Block, UntilRule, make_rule
from howfast.plugin import registry
from howfast.service import trials
from howfast.service.env import ServiceEnv
from howfast.service.installs import local_install
from howfast.service.prepared import FinishedRun, PreparedFleet, PreparedRun, ProgressDisplay
from howfast.service.requests import LiveMetrics, ProbeRequest, RunRequest, UntilOptions
from howfast.service.stores import open_results
from howfast.slo import RUN_KEY
from howfast.store.base import Store
from howfast.targets import registry as target_kinds
from howfast.targets.kind import OptionContext, RunShape, TargetOptions
from howfast.targets.pgsettings import SettingSource, check_settings, check_shared_memory
from howfast.targets.userpaths import check_run_targets

# The runners, the live exporter (prometheus_client, an HTTP server), the Prometheus
# samplers (urllib) and the run's reading load for a run, never for a dry run.
if TYPE_CHECKING:
    from howfast.metrics.live import MetricsObserver
    from howfast.runner import Runner, RunResult
    from howfast.runner.fleet import FleetRunner
    from howfast.samplers.session import SamplerFactory
    from howfast.targets.base import Target

__all__ = ["FinishedRun", "PreparedRun", "ProgressDisplay", "RunService"]


def _event_refusals(targets: Sequence[Target], steps: Sequence[StepSpec]) -> list[str]:
    """events/step.py's refusals; the event actions (and all they use) are imported only for
    a run whose steps have events."""
    if not any(isinstance(step.params.get("events"), list) for step in steps):
        return []
    from howfast.events.step import refusals

    return refusals(targets, steps)


class RunService:
    def __init__(self, env: ServiceEnv) -> None:
        self.env = env

    # -- prepare ----------------------------------------------------------------------------
    def prepare(self, request: RunRequest) -> PreparedRun:
        """Everything `howfast run` decides before it creates anything; UsageError (exit 2)
        for what cannot run. The refusals come in this order whatever the input: the
        targets' texts, the plan, the --until rule, the steps, the target options, events,
        then the fleet or each target's own."""
        texts = request.targets
        if not texts:
            raise UsageError("give at least one --target (a directory or a postgresql:// URI)")
        check_run_targets(texts, request.target_options.wal_dir)
        prometheus = request.sampling.prometheus_url
        extra_samplers = _prometheus_samplers(prometheus) if prometheus else []
        plan = self._load_plan(request.plan, texts)
        live = _live_metrics(request.live_metrics, plan)
        rule = _until_rule_of(request, plan)
        asked = trials.asked_trials(request.overrides.trials, plan.trials)
        trials.refuse_with_until(asked, rule is not None)
        overrides, steps, blocks = _expanded(plan, request.overrides, rule)
        trials.refuse_without_events(asked, plan.name, steps)
        made = self._target_options(request, plan, overrides)
        prepared = PreparedRun(
            command="howfast run",
            plan_name=plan.name,
            install=made.install,
            steps=steps,
            targets=(),
            label=request.label,
            slo=request.failure_slo.text if request.failure_slo else None,
            live_metrics=live,
        )
        if any(s.params.get("events") for s in steps) and (rule or plan.fleet is not None):
            raise UsageError(
                "events make a step's TPS an outage's: --until and [fleet] plans cannot take "
                "them (yet)"
            )
        if not request.dry_run:
            # What killed runs left is tidied by the next run, also one whose own inputs are
            # then refused (as before those refusals moved here, ahead of execute)
            for line in target_kinds.housekeeping(texts):
                self.env.info(line)
        if plan.fleet is not None:
            return _with_fleet(prepared, request, plan.fleet.all_scenarios(), made)
        targets = target_kinds.make_targets(texts, made)
        for target in targets:  # the same refusals for a run and its --dry-run (issue 35)
            target.check_inputs()
        refused = _event_refusals(targets, steps)  # issue 29: before anything is created
        refused += trials.refusals(targets, steps)
        if refused:
            raise UsageError("; ".join(refused))
        for line in trials.uneven_first_trial(targets, steps, made.design.standby_latency_ms):
            self.env.info(line)
        return dataclasses.replace(
            prepared,
            targets=tuple(targets),
            until=(rule, tuple(blocks)) if rule and blocks is not None else None,
            sampling=request.sampling,
            extra_samplers=tuple(extra_samplers),
        )

    def _load_plan(self, ref: str, texts: Sequence[str]) -> Plan:
        plan = load_plan(ref)
        if plan.name == "replication" and len(texts) < 2:  # said, not refused
            self.env.info(
                "warning: the replication plan compares designs: give two or more --target "
                "(e.g. DIR and 'DIR?replicas=1&sync=on')"
            )
        return plan

    def _target_options(
        self, request: RunRequest, plan: Plan, overrides: Overrides
    ) -> TargetOptions:
        """What every target is made with: the memory cap, the kinds' own options, the
        install (the settings checked by it) and the design."""
        texts, options = request.targets, request.target_options
        memory_limit = options.memory_bytes if options.memory_bytes is not None else plan.memory
        floor = memory_limit and cap_floor_problem(
            memory_limit, "--memory" if options.memory_bytes is not None else "the plan's memory"
        )
        if floor:
            raise UsageError(floor)
        kind_options = target_kinds.parse_kind_options(
            options.kind_values, OptionContext("run", texts, memory_limit, plan)
        )
        install = local_install(texts, options.pg_bin, self.env.info)
        settings = effective_settings(plan, overrides)
        if target_kinds.local_install(texts) == "server":  # clusters howfast creates here
            _check_settings(request.plan, plan, overrides.settings, install, memory_limit)
        return TargetOptions(
            install,
            wal_dir=options.wal_dir,
            settings=settings,
            keep=options.keep,
            overwrite=options.overwrite,
            checksums=options.checksums,
            memory_limit=memory_limit,
            kind_options=kind_options,
            # a target's own ?replicas= first (its kind), then the run options, then the plan
            design=merge_design(
                options.design, plan.design.options() if plan.design else DesignOptions()
            ),
        )

    def prepare_probe(self, request: ProbeRequest) -> PreparedRun:
        """Everything `howfast probe` decides before it creates anything (service/probe.py)."""
        from howfast.service import probe  # a run needs none of it: ~25 ms of start-up

        return probe.prepare_probe(self.env, request)

    # -- execute ----------------------------------------------------------------------------
    def execute(
        self, prepared: PreparedRun, observer: ProgressDisplay, *, for_people: bool = True
    ) -> FinishedRun:
        """Run it and store it, step by step; the observer is closed when the run ends,
        whatever happens. The run returned is derived as `results show` reads it
        (`for_people`: its texts made safe to print, for tables)."""
        from howfast.service.reading import read_run

        try:
            if prepared.before_store is not None:
                prepared.before_store()
            db = open_results(self.env, None)
        except BaseException:
            observer.close()
            raise
        try:
            result = self._run(prepared, db, observer)
            run = read_run(db, result.run_id, for_people=for_people)
        finally:
            db.close()
        assert run is not None, f"run {result.run_id} was just stored"
        return FinishedRun(result.run_id, result.status, result.failed_steps, run)

    def _run(self, prepared: PreparedRun, db: Store, observer: ProgressDisplay) -> RunResult:
        from howfast.runner.fanout import FanOut

        live = None
        linger_s = 0.0
        try:
            if prepared.live_metrics is not None:
                live = self._serve_metrics(prepared.plan_name, prepared.live_metrics)
            run_observer: RunObserver = (
                FanOut(observer, live, names=["the live metrics exporter (--metrics-port)"])
                if live
                else observer
            )
            if prepared.slo is not None:  # kept with the run as soon as it exists
                slo = _StoresSlo(db, prepared.slo)
                run_observer = FanOut(run_observer, slo, names=["storing --slo with the run"])
            result = self._runner(prepared, db, run_observer).execute()
            # Not after Ctrl-C: then the exporter stops at once. Imported here, not above:
            # metrics.live loads prometheus_client and an HTTP server, which only
            # --metrics-port needs (about 40 ms of every run's start otherwise).
            if live and result.status != "aborted":
                from howfast.metrics.live import LINGER_S

                linger_s = LINGER_S
        finally:
            observer.close()
            if live:  # one last scrape of the final figures, if something is scraping
                live.close(linger_s=linger_s)
        return result

    def _runner(
        self, prepared: PreparedRun, db: Store, observer: RunObserver
    ) -> Runner | FleetRunner:
        from howfast.runner import Runner, RunSettings
        from howfast.runner.fleet import FleetRunner

        settings = RunSettings(
            db,
            list(prepared.steps),
            plan_name=prepared.plan_name,
            install=prepared.install,
            observer=observer,
            label=prepared.label,
            clock=self.env.clock,
            cancel=self.env.cancel,
        )
        if prepared.fleet is not None:
            return FleetRunner(settings, prepared.fleet.place, prepared.fleet.scenarios)
        return Runner(
            settings,
            list(prepared.targets),
            sample_interval_s=prepared.sampling.interval_s,
            extra_samplers=prepared.extra_samplers,
            until=prepared.until,
        )

    def _serve_metrics(self, plan_name: str, live: LiveMetrics) -> MetricsObserver:
        """The live exporter, already serving (`run --metrics-port`)."""
        from howfast.metrics.live import MetricsObserver

        assert live.port is not None
        observer = MetricsObserver(plan_name)
        server = observer.serve(live.port, live.address)
        self.env.info(f"serving Prometheus metrics on {server.url} while the run lasts")
        return observer


class _StoresSlo:
    """Stores `run --slo rto=...,rpo=...` in the run's environment when the run is created
    (analysis/trials.py reads it): a run-level setting, not a step's."""

    def __init__(self, db: Store, slo: str) -> None:
        self.db, self.slo = db, slo

    def run_started(self, run_id: int, steps: int, targets: int) -> None:
        self.db.add_run_environment(run_id, {RUN_KEY: self.slo})

    def step_started(self, step: StepRef, expected_s: float | None) -> None:
        pass

    def step_progress(self, step: StepRef, t: float, values: dict[str, float]) -> None:
        pass

    def step_finished(self, step: StepRef, record: StepRecord) -> None:
        pass

    def message(self, text: str) -> None:
        pass


def _prometheus_samplers(url: str) -> list[SamplerFactory]:
    from howfast.samplers.prometheus import prometheus_samplers

    return prometheus_samplers(url)


def _until_rule_of(request: RunRequest, plan: Plan) -> UntilRule | None:
    """The --until rule (None: none), refused with a fleet; then what the target kinds
    refuse of the run's shape."""
    rule = _until_rule(request.until, plan, request.overrides.repeat)
    if rule and plan.fleet is not None:
        raise UsageError(
            "--until does not apply to a [fleet] plan (yet): its instances run side by "
            "side already; use --repeat"
        )
    shape = RunShape(until=rule is not None, fleet=plan.fleet is not None, dry_run=request.dry_run)
    target_kinds.refuse(request.targets, shape)
    return rule


def _expanded(
    plan: Plan, overrides: Overrides, rule: UntilRule | None
) -> tuple[Overrides, tuple[StepSpec, ...], list[Block] | None]:
    """The overrides in force, the steps and (with --until) the plan's blocks; refused when
    --dataset or --event would do nothing in this plan."""
    blocks = expand_blocks(plan, overrides) if rule else None
    if rule:  # --dry-run lists the rounds every test runs at least; progress starts there
        overrides = dataclasses.replace(overrides, repeat=rule.minimum)
    steps = tuple(expand(plan, overrides))
    if overrides.dataset and not any(registry.plugin(s.workload).loads_data for s in steps):
        raise UsageError(f"--dataset: plan {plan.name!r} loads no data (no pgbench-init step)")
    if overrides.events and not any(s.params.get("events") for s in steps):
        asked = " ".join(f"--event {e.text}" for e in overrides.events)
        raise UsageError(
            f"{asked}: plan {plan.name!r} has no pgbench step, the only steps events "
            "apply to: nothing would be done",
            "give a plan with a pgbench step (e.g. quick), or drop --event",
        )
    return overrides, steps, blocks


def _with_fleet(
    prepared: PreparedRun,
    request: RunRequest,
    scenarios: Iterable[FleetScenario],
    made: TargetOptions,
) -> PreparedRun:
    """A [fleet] plan's run: its place and scenarios, what a fleet refuses checked."""
    options = request.target_options
    _refuse_with_fleet(
        wal_dir=options.wal_dir, keep=options.keep, prometheus=request.sampling.prometheus_url
    )
    if made.design.given():  # a fleet's instances are made without the target kinds
        raise UsageError(
            "a fleet plan's instances get no standbys (yet): drop --replicas, --sync, "
            "--standby-dir, --standby-latency and the plan's [design]"
        )
    all_scenarios = tuple(scenarios)
    place = target_kinds.fleet_place(request.targets, made, planned=request.dry_run)
    place.check_plan(list(all_scenarios))  # before a dry run too: what the plan refuses
    return dataclasses.replace(prepared, fleet=PreparedFleet(place, all_scenarios))


def _refuse_with_fleet(**given: object) -> None:
    """Options that do not combine with a fleet (yet), each refused by name (the kinds
    refuse their own: targets/kinds/)."""
    named = [name for name, value in given.items() if value]
    if named:
        options = ", ".join(f"--{n.replace('_', '-')}" for n in named)
        raise UsageError(f"a fleet plan cannot be combined with {options} (yet)")


def _live_metrics(given: LiveMetrics, plan: Plan) -> LiveMetrics | None:
    """--metrics-port, else the plan's metrics_port; None: no live exporter."""
    port = given.port if given.port is not None else plan.metrics_port
    if given.address and port is None:
        raise UsageError("--metrics-address needs --metrics-port (or the plan's metrics_port)")
    return None if port is None else LiveMetrics(port, given.address)


def _until_rule(given: UntilOptions, plan: Plan, repeat: int | None) -> UntilRule | None:
    """--until/--budget, else the plan's `until` and `budget`; --repeat (or the plan's
    `repeat`) is the minimum number of repetitions."""
    return make_rule(
        given.until if given.until is not None else plan.until,
        given.budget if given.budget is not None else plan.budget,
        repeat=repeat if repeat is not None else plan.repeat,
        until_option="the plan's until" if given.until is None and plan.until else "--until",
        budget_option="--budget" if given.budget is not None else "the plan's budget",
    )


def _check_settings(
    plan_ref: str,
    plan: Plan,
    sets: dict[str, str],
    install: PgInstall,
    memory_limit: int | None,
) -> None:
    """The settings of clusters howfast creates: checked before anything is created or
    stored, by the PostgreSQL that would read them, and against memory."""
    sources = [SettingSource(*located) for located in setting_locations(plan_ref, plan)] + [
        SettingSource(n, v, f"--set {n}={v}") for n, v in sets.items()
    ]
    check_settings(install, sources)
    # The memory it needs is that of the value in force: a --set replaces the plan's.
    in_force = [
        s for s in sources if not (s.name in sets and s.where.endswith(f": settings.{s.name}"))
    ]
    check_shared_memory(in_force, memory_basis(memory_limit))
