"""What a plan file may say: its top-level keys, its steps (one model per workload, found in
the workload registry), and the command-line overrides.

The models are strict (a TOML string is not silently an integer) and forbid unknown keys, so
that a typo in a plan is an error instead of a default quietly taking its place. Each
workload's step model lives in its plan module (workloads/plugin.py); the value types they
share in workloads/fields.py, durations and sizes in units.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from howfast.errors import UsageError
from howfast.plans.fleet import FleetSection
from howfast.plans.until import check_until
from howfast.rates import parse_slo
from howfast.sizing import dataset_value
from howfast.units import (
    duration_seconds,
    parse_duration,
    parse_size,
    quote,
    size_bytes,
    whole_seconds,
)
from howfast.workloads import registry
from howfast.workloads.fields import (
    RESERVED_SETTINGS,
    Duration,
    PositiveInt,
    Settings,
    Size,
    no_duplicates,
    setting_name,
    setting_value,
)

# The overrides' modes are pgbench's (--modes).
from howfast.workloads.pgbench.plan import PGBENCH_MODES, check_mode
from howfast.workloads.plugin import StepModel

# A step of a plan: the model of the workload its `workload` key names.
STEP_MODELS: dict[str, type[StepModel]] = registry.step_models()
if TYPE_CHECKING:
    Step = StepModel
else:
    Step = Annotated[Union[tuple(STEP_MODELS.values())], Field(discriminator="workload")]  # noqa: UP007


# The most latency an emulated volume adds to each I/O. Building the volume and the cluster
# makes hundreds of I/Os one after another (mounting it about 40, initdb and the QD1 checks
# hundreds more): at 100 ms that took over two minutes on the test machine, at 1 s a mount
# alone took 42 s, and every step's I/O waits as long (docs/emulated-storage.md).
MAX_ADDED_LATENCY_MS = 100.0


def added_latency_ms(value: object) -> float:
    """An added latency in milliseconds: "2ms", "0.1s", or "0" for none; at most
    MAX_ADDED_LATENCY_MS."""
    if isinstance(value, str) and value.strip().lower() in ("0", "0ms", "0s"):
        return 0.0
    ms = duration_seconds(value) * 1000
    if ms > MAX_ADDED_LATENCY_MS:
        raise ValueError(too_much_latency(value))
    return ms


def too_much_latency(value: object) -> str:
    return (
        f"{quote(value)} is more latency than an emulated volume adds: at most "
        f"{MAX_ADDED_LATENCY_MS:g}ms per I/O (building the volume and the cluster makes "
        "hundreds of I/Os one after another, which at 100ms already takes minutes)"
    )


def _listed(value: object) -> object:
    """`latency = "2ms"` and `iops = 500` are read as one-element lists."""
    return [value] if isinstance(value, str | int) and not isinstance(value, bool) else value


AddedLatency = Annotated[float, BeforeValidator(added_latency_ms)]
IopsCap = Annotated[int, Field(ge=0)]  # 0: no cap


class StorageSection(BaseModel):
    """`[storage]`: run each directory target on emulated volumes, one variant per latency and
    IOPS cap (docs/emulated-storage.md); --storage-latency/--storage-iops override."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    latency: Annotated[list[AddedLatency], BeforeValidator(_listed), Field(min_length=1)] = [0.0]
    iops: Annotated[list[IopsCap], BeforeValidator(_listed), Field(min_length=1)] = [0]
    size: Size = 4 * 1024**3


class Plan(BaseModel):
    """A plan file: settings for the clusters howfast creates, and the steps to run."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = ""  # defaults to the built-in's name or the file's stem
    description: str = ""
    repeat: PositiveInt = 1
    # Repeat each measuring test until its 95% interval is this narrow ("ci=2%"), within a
    # time budget (plans/until.py); --until and --budget override
    until: Annotated[str, AfterValidator(check_until)] | None = None
    budget: Duration | None = None
    settings: Settings = {}
    # The server's memory cap (like --memory, which overrides it): emulates a smaller machine
    memory: Size | None = None
    storage: StorageSection | None = None
    fleet: FleetSection | None = None  # many instances at once, in classes (plans/fleet.py)
    # Serve live Prometheus metrics on this port while the run lasts (--metrics-port wins)
    metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    steps: Annotated[list[Step], Field(min_length=1)]


# ---------------------------------------------------------------------------------------------
# Command-line overrides and the parsers the CLI uses to build them.


@dataclass(frozen=True)
class Overrides:
    """`howfast run` options that change a plan. None (or empty) leaves the plan's value.

    Checked on construction, so a bad value is a UsageError before anything runs.
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
        if self.clients is not None:
            _check_list("--clients", self.clients)
            if min(self.clients) < 1:
                raise UsageError(f"--clients must be 1 or more, got {min(self.clients)}")
        if self.modes is not None:
            _check_list("--modes", self.modes)
            for mode in self.modes:
                check_mode(mode)
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


def _check_list(option: str, values: list[Any]) -> None:
    if not values:
        raise UsageError(f"{option} needs at least one value")
    try:
        no_duplicates(values)
    except ValueError as e:
        raise UsageError(f"{option}: {e}") from None


def parse_int_list(text: str, option: str = "--clients") -> list[int]:
    """Positive integers separated by commas: "1,2,4" -> [1, 2, 4]."""
    values = []
    for item in text.split(","):
        item = item.strip()
        if not (item.isascii() and item.isdigit()) or int(item) < 1:
            raise UsageError(
                f"{option}: {quote(item)} is not a whole number of 1 or more",
                hint="write numbers separated by commas, e.g. 1,2,4",
            )
        values.append(int(item))
    return values


def parse_modes(text: str, option: str = "--modes") -> list[str]:
    """pgbench modes separated by commas: "select-only,tpcb-like"."""
    modes = [item.strip() for item in text.split(",")]
    for mode in modes:
        check_mode(mode)
    _check_list(option, modes)
    return modes


def parse_set_option(text: str) -> tuple[str, str]:
    """`--set name=value` -> (name, value). The value is kept as written (it may be empty)."""
    name, equals, value = text.partition("=")
    if not equals:
        raise UsageError(
            f"--set {quote(text)}: expected name=value", hint="e.g. --set shared_buffers=1GB"
        )
    try:
        return setting_name(name.strip()), setting_value(value)
    except ValueError as e:
        raise UsageError(f"--set {quote(text)}: {e}") from None


# Names that moved to workloads/fields.py, sizing.py and units.py; still importable from here.
__all__ = [
    "PGBENCH_MODES",
    "RESERVED_SETTINGS",
    "STEP_MODELS",
    "Overrides",
    "Plan",
    "Step",
    "dataset_value",
    "duration_seconds",
    "parse_duration",
    "parse_int_list",
    "parse_modes",
    "parse_set_option",
    "parse_size",
    "setting_name",
    "setting_value",
    "size_bytes",
]
