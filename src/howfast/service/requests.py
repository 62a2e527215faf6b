"""What a command asks of the run service (service/run.py), as typed values: the CLI parses
its options into these and nothing else; no click here, so any caller (a test, another
front end) builds them directly.

    request = RunRequest("quick", targets=("/mnt/a",), overrides=Overrides(clients=[1, 4]))
    prepared = RunService(env).prepare(request)   # every usage error, nothing created
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from howfast.design import DesignOptions
from howfast.slo import FailureSlo

if TYPE_CHECKING:
    from howfast.plugin.overrides import Overrides

DEFAULT_SAMPLE_INTERVAL_S = 1.0  # run --sample-interval's default
DEFAULT_PROBE_SIZE_BYTES = 1024**3  # probe --size's default
DEFAULT_PROBE_RUNTIME_S = 10  # probe --runtime's default
DEFAULT_FSYNC_SECONDS = 2  # probe --fsync-seconds's default


def _no_overrides() -> Overrides:
    # Loaded when a request is made: plugin.overrides loads pydantic, which a command that
    # only builds a ServiceEnv (results, compare, export...) never needs.
    from howfast.plugin.overrides import Overrides

    return Overrides()


@dataclass(frozen=True)
class SamplingOptions:
    interval_s: float | None = DEFAULT_SAMPLE_INTERVAL_S  # None: no sampling
    prometheus_url: str | None = None  # --prometheus: read its series after each step


@dataclass(frozen=True)
class LiveMetrics:
    """--metrics-port/--metrics-address; a port of None takes the plan's `metrics_port`."""

    port: int | None = None
    address: str | None = None


@dataclass(frozen=True)
class UntilOptions:
    """--until/--budget as given; None takes the plan's `until`/`budget`."""

    until: str | None = None
    budget: str | None = None


@dataclass(frozen=True)
class TargetRunOptions:
    """The options of the targets, shared by every kind; each kind refuses what it cannot
    apply. `kind_values` holds the options that the kinds declare themselves (targets/kinds/:
    `--namespace` for k8s://, `--storage-latency` for directories...), by name, as given;
    the kinds parse them (targets/registry.py `parse_kind_options`)."""

    pg_bin: str | None = None
    wal_dir: Path | None = None
    keep: bool = False
    overwrite: bool = False  # --yes: re-initialise pgbench tables on a server URI
    checksums: bool = False
    memory_bytes: int | None = None  # --memory; None: the plan's `memory`, if any
    kind_values: Mapping[str, str | None] = field(default_factory=dict)
    # --replicas, --sync, --standby-dir, --standby-latency: every target's design unless its
    # text says otherwise (`DIR?replicas=1`; docs/replication.md)
    design: DesignOptions = field(default_factory=DesignOptions)


@dataclass(frozen=True)
class RunRequest:
    """`howfast run PLAN --target T...`: the plan (a built-in name or a file) and the options
    that change it."""

    plan: str
    targets: tuple[str, ...]
    overrides: Overrides = field(default_factory=_no_overrides)
    target_options: TargetRunOptions = field(default_factory=TargetRunOptions)
    label: str | None = None
    sampling: SamplingOptions = field(default_factory=SamplingOptions)
    until: UntilOptions = field(default_factory=UntilOptions)
    live_metrics: LiveMetrics = field(default_factory=LiveMetrics)
    dry_run: bool = False
    failure_slo: FailureSlo | None = None  # --slo rto=...,rpo=...: stored with the run


@dataclass(frozen=True)
class ProbeRequest:
    """`howfast probe DIR|k8s://CLASS`: fio's profiles and pg_test_fsync on a storage."""

    where: str
    profiles: tuple[str, ...] = ()  # () : all of them
    size_bytes: int = DEFAULT_PROBE_SIZE_BYTES
    runtime_s: int = DEFAULT_PROBE_RUNTIME_S
    fsync_seconds: int = DEFAULT_FSYNC_SECONDS
    target_options: TargetRunOptions = field(default_factory=TargetRunOptions)
    label: str | None = None
    dry_run: bool = False
