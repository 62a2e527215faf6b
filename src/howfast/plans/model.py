"""What a plan file may say: its top-level keys, its steps (one model per workload, found in
the workload registry), and the parsers of the command-line options that change a plan
(the overrides themselves are plugin/overrides.py's: workloads read them).

The models are strict (a TOML string is not silently an integer) and forbid unknown keys, so
that a typo in a plan is an error instead of a default quietly taking its place. Each
workload's step model lives in its plan module (plugin/workload.py); the value types they
share in plugin/fields.py, durations and sizes in units.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from howfast.design import MAX_REPLICAS, DesignOptions
from howfast.errors import UsageError
from howfast.plans.fleet import FleetSection
from howfast.plans.until import check_until
from howfast.plugin import registry
from howfast.plugin.fields import (
    Duration,
    PositiveInt,
    Settings,
    Size,
    setting_name,
    setting_value,
)
from howfast.plugin.trials import MAX_TRIALS
from howfast.plugin.workload import StepModel
from howfast.units import duration_seconds, quote

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


class DesignSection(BaseModel):
    """`[design]`: standbys for every target of the plan that does not say otherwise
    (docs/replication.md); --replicas, --sync, --standby-latency and a target's own
    `?replicas=` override."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    replicas: Annotated[int, Field(ge=0, le=MAX_REPLICAS)] | None = None
    sync: Literal["off", "local", "remote_write", "on", "remote_apply"] | None = None
    standby_latency: AddedLatency | None = None

    def options(self) -> DesignOptions:
        return DesignOptions(
            replicas=self.replicas, sync=self.sync, standby_latency_ms=self.standby_latency
        )


class Plan(BaseModel):
    """A plan file: settings for the clusters howfast creates, and the steps to run."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str = ""  # defaults to the built-in's name or the file's stem
    description: str = ""
    repeat: PositiveInt = 1
    # Run each pgbench step that has events as this many short trials (--trials overrides;
    # plugin/trials.py, docs/events.md)
    trials: Annotated[int, Field(ge=2, le=MAX_TRIALS)] | None = None
    # Repeat each measuring test until its 95% interval is this narrow ("ci=2%"), within a
    # time budget (plans/until.py); --until and --budget override
    until: Annotated[str, AfterValidator(check_until)] | None = None
    budget: Duration | None = None
    settings: Settings = {}
    # The server's memory cap (like --memory, which overrides it): emulates a smaller machine
    memory: Size | None = None
    storage: StorageSection | None = None
    design: DesignSection | None = None  # standbys (--replicas...), for every target
    fleet: FleetSection | None = None  # many instances at once, in classes (plans/fleet.py)
    # Serve live Prometheus metrics on this port while the run lasts (--metrics-port wins)
    metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    steps: Annotated[list[Step], Field(min_length=1)]


# ---------------------------------------------------------------------------------------------
# Parsers the CLI uses to build the overrides (plugin/overrides.py).


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
