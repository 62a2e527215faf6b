"""The `pgbench` workload as a plan sees it: its step model, its expansion into runs (modes x
client counts x offered rates x repetitions, warm-up first), labels, duration and metrics.

Pure: no I/O, no clock, no CPU count. What only the machine that runs the step can know
(pgbench's thread count when the plan leaves it open) stays None for the runner to resolve.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from howfast.errors import UsageError
from howfast.metric import Metric
from howfast.model import JSONValue, StepRecord, StepSpec
from howfast.plugin.events import event_from_text, plan_event
from howfast.plugin.fields import (
    Duration,
    PositiveInt,
    Settings,
    check_extra_arg,
    conflict,
    no_duplicates,
    one_or_list,
)
from howfast.plugin.overrides import Overrides, check_list
from howfast.plugin.trials import window_s as trial_window_s
from howfast.plugin.workload import ExpandContext, Program, StepModel, WorkloadPlugin
from howfast.rates import parse_slo, rate_label
from howfast.units import quote, whole_seconds

PGBENCH_MODES: tuple[str, ...] = ("select-only", "tpcb-like", "simple-update")
Mode = Literal["select-only", "tpcb-like", "simple-update"]

# Options that a plan key controls; in extra_args they would contradict the recorded params.
_OWNED = {
    "-c": "clients",
    "--client": "clients",
    "-j": "jobs",
    "--jobs": "jobs",
    "-T": "duration",
    "--time": "duration",
    "-t": "transactions",
    "--transactions": "transactions",
    "-R": "rate",
    "--rate": "rate",
    "-L": "latency_limit",
    "--latency-limit": "latency_limit",
    "-M": "protocol",
    "--protocol": "protocol",
    "-b": "modes",
    "--builtin": "modes",
    "-S": "modes",
    "--select-only": "modes",
    "-N": "modes",
    "--skip-some-updates": "modes",
    "-f": "scripts",
    "--file": "scripts",
    "-s": "scale (of the pgbench-init step)",
    "--scale": "scale (of the pgbench-init step)",
    "-r": "statement_latencies",
    "--report-per-command": "statement_latencies",
    "--report-latencies": "statement_latencies",
    "--sampling-rate": "latency_log",
}


def _pgbench_arg(arg: str) -> str:
    return check_extra_arg(arg, _OWNED)


def _script(value: str, info: ValidationInfo) -> str:
    """`path[@weight]`; a relative path is relative to the plan file."""
    path, at, weight = value.rpartition("@") if "@" in value else (value, "", "")
    if at and not (weight.isascii() and weight.isdigit() and int(weight) >= 1):
        raise ValueError(
            f"the weight after @ must be a whole number of at least 1, got {quote(weight)}"
        )
    if not path:
        raise ValueError("a script needs a file name")
    base_dir = info.context.get("base_dir") if isinstance(info.context, dict) else None
    if isinstance(base_dir, Path):
        resolved = (base_dir / path).resolve()
        if not resolved.is_file():
            raise ValueError(f"no such script file: {resolved}")
        path = str(resolved)
    return f"{path}@{weight}" if at else path


PgbenchArg = Annotated[str, AfterValidator(_pgbench_arg)]
Script = Annotated[str, AfterValidator(_script)]
ClientList = Annotated[list[PositiveInt], BeforeValidator(one_or_list), Field(min_length=1)]


class PgbenchStep(StepModel):
    """`pgbench`: built-in modes or custom scripts, for each client count in turn."""

    workload: Literal["pgbench"]
    modes: Annotated[list[Mode], Field(min_length=1)] | None = None
    scripts: Annotated[list[Script], Field(min_length=1)] | None = None
    clients: ClientList
    jobs: PositiveInt | None = None
    duration: Duration | None = None
    transactions: PositiveInt | None = None
    rate: float | None = Field(default=None, gt=0)
    latency_limit: Duration | None = None
    protocol: Literal["simple", "extended", "prepared"] | None = None
    extra_args: list[PgbenchArg] = Field(default_factory=list)
    # postgresql.conf settings for these runs only, over the plan's [settings] and --set
    settings: Settings = Field(default_factory=dict)
    # A run of this long before each mode's measurements, stored and left out of statistics
    warmup: Duration | None = None
    # Latency under load: fixed offered rates (transactions/s), or fractions of the maximum
    # TPS that a full-speed run measures first; and a latency objective such as "p99=10ms".
    rates: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1)] | None = None
    rate_fractions: (
        Annotated[list[Annotated[float, Field(gt=0, le=10)]], Field(min_length=1)] | None
    ) = None
    # Whose maximum the fractions are of: each target's own, or the run's first target's (the
    # same offered load on every target: one holds it, a slower one piles up latency).
    rate_basis: Literal["target", "first-target"] = "target"
    slo: str | None = None
    # Per-statement latencies (pgbench -r): None lets howfast decide (every mode but
    # select-only, where they cost the most and tell the least).
    statement_latencies: bool | None = None
    # The per-transaction log: a random sample sized to the expected rate, or every line.
    latency_log: Literal["sampled", "full"] = "sampled"
    # Events during each run (docs/events.md): "20s:restart", or tables ({at, action} or
    # {at, exec = [argv]}); kept as their canonical texts. The load then runs in segments of
    # at most `segment` seconds (default 10), which survive the events.
    events: list[str] = Field(default_factory=list)
    segment: PositiveInt | None = None

    @field_validator("events", mode="before")
    @classmethod
    def _events(cls, value: Any) -> list[str]:
        items = value if isinstance(value, list) else [value]
        texts = [plan_event(item).text for item in items]
        return no_duplicates(texts)

    @field_validator("slo")
    @classmethod
    def _valid_slo(cls, text: str | None) -> str | None:
        if text is None:
            return None
        try:
            return parse_slo(text).text
        except UsageError as e:
            raise ValueError(e.message.replace("--slo ", "")) from None

    @field_validator("modes", "clients")
    @classmethod
    def _distinct(cls, values: list[Any] | None) -> list[Any] | None:
        return None if values is None else no_duplicates(values)

    @field_validator("duration", "warmup")
    @classmethod
    def _duration_in_seconds(cls, seconds: float | None) -> float | None:
        # pgbench -T takes whole seconds.
        return None if seconds is None else whole_seconds(seconds)

    @model_validator(mode="after")
    def _one_of_each_pair(self) -> Self:
        problems: list[tuple[str | None, str]] = []
        if self.modes is not None and self.scripts is not None:
            problems.append(("scripts", "give modes or scripts, not both"))
        if self.modes is None and self.scripts is None:
            problems.append((None, "missing modes (or scripts): which transactions to run"))
        if self.duration is not None and self.transactions is not None:
            problems.append(("transactions", "give duration or transactions, not both"))
        if self.duration is None and self.transactions is None:
            problems.append((None, "missing duration (or transactions): how long each run lasts"))
        rate_keys = [k for k in ("rate", "rates", "rate_fractions") if getattr(self, k)]
        if len(rate_keys) > 1:
            problems.append((rate_keys[1], f"give one of {', '.join(rate_keys)}, not several"))
        if self.segment is not None and not self.events:
            problems.append(("segment", "segment applies to steps with events only"))
        if "rate_basis" in self.model_fields_set and not self.rate_fractions:
            problems.append(("rate_basis", "rate_basis applies to rate_fractions only"))
        if len(problems) == 1:
            raise conflict(*problems[0])
        if problems:  # a validator raises one error: name them all, at the step's header
            raise conflict(None, "; ".join(message for _, message in problems))
        return self


def _m(name: str, label: str, unit: str, higher: bool | None, digits: int) -> Metric:
    return Metric(name, label, unit, higher, digits)


class PgbenchPlugin(WorkloadPlugin[PgbenchStep]):
    name = "pgbench"
    model = PgbenchStep
    order = 20
    executor_class = "howfast.workloads.pgbench.workload:PgbenchWorkload"
    analysis = "howfast.workloads.pgbench.analysis:ANALYSIS"
    report = "howfast.workloads.pgbench.report:REPORT"
    importer = "howfast.workloads.pgbench.imports:IMPORTER"
    # What was asked of pgbench and the data it ran on (script, scripts: imported output)
    test_params = (
        "mode",
        "scripts",
        "script",
        "clients",
        "jobs",
        "duration_s",
        "transactions",
        "scale",
        "dataset",
        "rate",
        "rate_fraction",
        "rate_basis",
        "curve_role",
        "slo",
        "latency_limit_ms",
        "protocol",
        "extra_args",
        # events during the step (docs/events.md): an outage is never a quiet step's test
        "events",
        "segment",
    )
    other_params = (
        "curve_last",
        "statement_latencies",
        "latency_log",
        "script_weights",
        "log_sampling_rate",
        "log_expected_tps",
        "log_sampling_basis",
        "progress_source",
    )
    sampled = True
    drives_sessions = True
    reads_loaded_data = True  # custom scripts too: a plan loads tables before them to use them
    client_side = True
    throughput_metric = "tps"
    steady_series = True
    counts_transactions = True
    design_figures = True  # what a replication design costs: lags, SyncRep, commit split
    programs = (Program("pgbench", "postgres", "every PostgreSQL benchmark", required=True),)
    metrics = (
        _m("tps", "TPS", "tx/s", True, 1),
        _m("steady_tps", "steady TPS", "tx/s", True, 1),
        _m("latency_avg_ms", "avg latency", "ms", False, 3),
        _m("steady_latency_avg_ms", "steady avg latency", "ms", False, 3),
        _m("latency_p50_ms", "p50 latency", "ms", False, 3),
        _m("latency_p90_ms", "p90 latency", "ms", False, 3),
        _m("latency_p95_ms", "p95 latency", "ms", False, 3),
        _m("latency_p99_ms", "p99 latency", "ms", False, 3),
        _m("latency_p999_ms", "p99.9 latency", "ms", False, 3),
        _m("latency_max_ms", "max latency", "ms", False, 3),
        _m("conn_time_ms", "connection time", "ms", False, 2),
    )
    # The steady_* ones come from the per-second series (analysis/steady.py), not from pgbench.
    key_metrics = (
        "tps",
        "steady_tps",
        "latency_avg_ms",
        "steady_latency_avg_ms",
        "latency_p50_ms",
        "latency_p95_ms",
        "latency_p99_ms",
        "conn_time_ms",
    )
    headline_metrics = ("tps", "steady_tps", "latency_avg_ms", "latency_p99_ms")

    def expand(self, step: PgbenchStep, ctx: ExpandContext) -> list[StepSpec]:
        """For each mode, for each client count (each offered rate), each repetition; a
        mode's warm-up run first."""
        overrides = ctx.overrides
        # --modes replaces built-in modes; a step of custom scripts stays what it is.
        if step.scripts is not None:
            variants: list[tuple[str, list[str] | None]] = [("custom", list(step.scripts))]
        else:
            variants = [(mode, None) for mode in (overrides.modes or step.modes or [])]
        # --duration replaces the length of every pgbench step, including one given in
        # transactions.
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
                if ctx.scale is not None:
                    params["scale"] = ctx.scale
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
                if step.statement_latencies is not None:
                    params["statement_latencies"] = step.statement_latencies
                if step.latency_log != "sampled":
                    params["latency_log"] = step.latency_log
                events = (
                    [e.text for e in overrides.events]
                    if overrides.events is not None
                    else list(step.events)
                )
                trials = None
                if events:
                    params["events"] = list(events)
                    if step.segment is not None:
                        params["segment"] = step.segment
                    trials = _as_trials(params, events, ctx)
                for rate_params in _rate_variants(step, ctx):
                    runs = ctx.repeated("pgbench", times=trials, **params, **rate_params)
                    for earlier in runs[:-1]:  # the curve is complete after its very last run
                        earlier.params.pop("curve_last", None)
                    measured += runs
            specs += _warmup(step, measured) + measured
        return specs

    def label(self, params: Mapping[str, JSONValue]) -> str:
        mode = params.get("mode")
        duration = params.get("duration_s")
        how = (
            f"{duration:g} s"
            if isinstance(duration, int | float)
            else f"{params.get('transactions')} tx/client"
        )
        text = f"pgbench {mode}, {params.get('clients')} clients, {how}"
        if params.get("rate") is not None:
            text += f", rate {params['rate']}/s"
        elif isinstance(params.get("rate_fraction"), int | float):
            whose = "the first target's " if params.get("rate_basis") == "first-target" else ""
            text += f", rate {float(params['rate_fraction']):.0%} of {whose}the maximum"
        elif params.get("curve_role") == "max":
            text += ", full speed (the curve's maximum)"
        return text + _settings_text(params)

    def short_label(self, params: Mapping[str, JSONValue]) -> str:
        clients = params.get("clients")
        text = f"pgbench {params.get('mode')}, {clients} client{'' if clients == 1 else 's'}"
        rate = rate_label(params)
        return f"{text}, {rate}" if rate else text

    def expected_seconds(self, params: Mapping[str, JSONValue]) -> float | None:
        duration = params.get("duration_s")
        return float(duration) if isinstance(duration, int | float) else None

    def test_key(self, params: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
        """A step of a rate curve asks for a fraction of the maximum: the rate that came to
        is a result, not part of the test."""
        key = super().test_key(params)
        if "rate_fraction" in params:
            key.pop("rate", None)
        return key

    def compact_label(self, params: Mapping[str, JSONValue]) -> str:
        return f"pgbench {params.get('mode')} {params.get('clients')}c"

    def fleet_label(self, params: Mapping[str, JSONValue]) -> str:
        return f"pgbench {params.get('mode')}, {params.get('clients')} clients"

    def prometheus_labels(self, params: Mapping[str, JSONValue]) -> tuple[str, str]:
        clients = params.get("clients")
        return (str(params.get("mode") or ""), "" if clients is None else str(clients))

    def progress_summary(self, metrics: Mapping[str, JSONValue]) -> list[str]:
        parts = []
        if "tps" in metrics:
            parts.append(f"{float(metrics['tps']):,.1f} tps")
        if "latency_avg_ms" in metrics:
            parts.append(f"avg {float(metrics['latency_avg_ms']):.3f} ms")
        if "latency_p99_ms" in metrics:
            parts.append(f"p99 {float(metrics['latency_p99_ms']):.3f} ms")
        return parts

    def judged_metrics(
        self, params: Mapping[str, JSONValue], records: Sequence[StepRecord]
    ) -> tuple[str, ...]:
        """At a fixed rate TPS is the rate: its latency says how well it was served."""
        return ("latency_avg_ms",) if params.get("rate") is not None else ("tps",)

    def full_speed(self, params: Mapping[str, JSONValue]) -> bool:
        return (
            params.get("warmup") is not True
            and params.get("rate") is None
            and params.get("rate_fraction") is None
        )

    def check_overrides(self, overrides: Overrides) -> None:
        for mode in overrides.modes or []:  # --modes
            check_mode(mode)


def _settings_text(params: Mapping[str, JSONValue]) -> str:
    settings = params.get("settings")
    if isinstance(settings, dict) and settings:
        return ", " + ", ".join(f"{k}={v}" for k, v in settings.items())
    return ""


def _as_trials(params: dict[str, JSONValue], events: list[str], ctx: ExpandContext) -> int | None:
    """With --trials (or the plan's `trials`): the step becomes its trials, each a window of
    load as long as plugin/trials.py says, which `trials` in its params records; None
    without."""
    if ctx.trials is None:
        return None
    params.pop("transactions", None)
    specs = [event_from_text(text) for text in events]
    params["duration_s"] = trial_window_s(specs, ctx.overrides.duration_s)
    params["trials"] = ctx.trials
    return ctx.trials


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
    params.pop("trials", None)  # a warm-up is not one of the trials
    return [StepSpec("pgbench", params)]


def _rate_variants(step: PgbenchStep, ctx: ExpandContext) -> list[dict[str, JSONValue]]:
    """What is offered to pgbench for one client count: nothing (full speed), one fixed rate,
    or a curve. A curve of fractions starts with a full-speed run (`curve_role: max`) whose
    TPS the fractions are taken of at run time; the last point of a curve is marked, so the
    curve's saturation point and knee can be stored with it."""
    overrides = ctx.overrides
    if overrides.rate is not None:
        return [{"rate": overrides.rate}]
    rates = overrides.rates or step.rates
    if rates:
        variants: list[dict[str, JSONValue]] = [{"rate": r} for r in rates]
    elif step.rate_fractions and not overrides.rates:
        basis: dict[str, JSONValue] = (
            {"rate_basis": step.rate_basis} if step.rate_basis != "target" else {}
        )
        variants = [{"curve_role": "max"}] + [
            {"rate_fraction": f, **basis} for f in step.rate_fractions
        ]
    elif step.rate is not None:
        return [{"rate": step.rate}]
    else:
        return [{}]
    if len(variants) > 1:
        variants[-1]["curve_last"] = True
    return variants


def check_mode(mode: str) -> str:
    """A pgbench built-in mode; UsageError with the closest one otherwise."""
    if mode not in PGBENCH_MODES:
        import difflib

        close = difflib.get_close_matches(mode, PGBENCH_MODES, n=1)
        hint = (
            f"did you mean {quote(close[0])}?"
            if close
            else f"choose from {', '.join(PGBENCH_MODES)}"
        )
        raise UsageError(f"unknown pgbench mode {quote(mode)}", hint=hint)
    return mode


def parse_modes(text: str, option: str = "--modes") -> list[str]:
    """pgbench modes separated by commas: "select-only,tpcb-like"."""
    modes = [item.strip() for item in text.split(",")]
    for mode in modes:
        check_mode(mode)
    check_list(option, modes)
    return modes


PLUGIN = PgbenchPlugin()
