"""`howfast run` options that change a plan (--scale, --clients, --modes, --rate...), checked
when they are given. The plans package applies them; each workload's plugin reads them when it
expands its steps (plugin/workload.py's ExpandContext) and refuses those it cannot take."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from howfast.errors import UsageError
from howfast.eventspec import EventSpec
from howfast.plugin.fields import no_duplicates, setting_name, setting_value
from howfast.plugin.trials import check_trials
from howfast.rates import parse_slo
from howfast.sizing import dataset_value
from howfast.units import duration_seconds, whole_seconds


@dataclass(frozen=True)
class Overrides:
    """`howfast run` options that change a plan. None (or empty) leaves the plan's value.

    Checked on construction, so a bad value is a UsageError before anything runs; what only
    one workload knows (pgbench's modes) its plugin checks when the plan is expanded.
    """

    scale: int | None = None
    clients: list[int] | None = None
    duration_s: float | None = None
    modes: list[str] | None = None
    repeat: int | None = None
    settings: dict[str, str] = field(default_factory=dict)
    rate: float | None = None  # --rate: one fixed offered rate for every pgbench step
    rates: list[float] | None = None  # --rates: these offered rates instead of the plan's
    slo: str | None = None  # --slo p99=10ms
    dataset: str | None = None  # --dataset: a regime or size for every pgbench-init step
    # --event AT:ACTION: these events during every pgbench step, instead of the plan's
    events: tuple[EventSpec, ...] | None = None
    # --trials N: every pgbench step with events run as N short trials (plugin/trials.py)
    trials: int | None = None

    def __post_init__(self) -> None:
        if self.dataset is not None:
            if self.scale is not None:
                raise UsageError("give --scale or --dataset, not both")
            try:
                dataset_value(self.dataset)
            except ValueError as e:
                raise UsageError(f"--dataset {e}") from None
        if self.rate is not None and self.rates is not None:
            raise UsageError("give --rate or --rates, not both")
        for value in [self.rate] if self.rate is not None else self.rates or []:
            if value <= 0:
                raise UsageError(f"a rate must be above 0 transactions/s, got {value:g}")
        if self.slo is not None:
            object.__setattr__(self, "slo", parse_slo(self.slo).text)
        if self.scale is not None and self.scale < 1:
            raise UsageError(f"--scale must be 1 or more, got {self.scale}")
        if self.repeat is not None and self.repeat < 1:
            raise UsageError(f"--repeat must be 1 or more, got {self.repeat}")
        if self.trials is not None:
            check_trials(self.trials)
            if self.repeat is not None:
                raise UsageError(
                    "give --repeat or --trials, not both: each trial is stored as a repetition "
                    "of its step (the plan's `repeat` still applies to steps without events)"
                )
        if self.clients is not None:
            check_list("--clients", self.clients)
            if min(self.clients) < 1:
                raise UsageError(f"--clients must be 1 or more, got {min(self.clients)}")
        if self.modes is not None:  # which modes exist is pgbench's (its check_overrides)
            check_list("--modes", self.modes)
        if self.duration_s is not None:
            try:
                whole_seconds(duration_seconds(self.duration_s))
            except ValueError as e:
                raise UsageError(f"--duration: {e}") from None
        try:
            settings = {setting_name(k): setting_value(v) for k, v in self.settings.items()}
        except ValueError as e:
            raise UsageError(f"--set: {e}") from None
        object.__setattr__(self, "settings", settings)  # frozen: normalise names once, here


def check_list(option: str, values: list[Any]) -> None:
    if not values:
        raise UsageError(f"{option} needs at least one value")
    try:
        no_duplicates(values)
    except ValueError as e:
        raise UsageError(f"{option}: {e}") from None
