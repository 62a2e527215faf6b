"""`howfast run`: execute a plan on one or more targets and store the results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import click

from howfast.cli.context import CliEnv, pass_env
from howfast.cli.kind_options import kind_values, target_kind_options
from howfast.cli.options import (
    LazyHelpOption,
    RawArgsCommand,
    check_path_value,
    checked_path,
    gathered,
    json_option,
    store_option,
)
from howfast.cli.output import finish, print_dry_run, progress
from howfast.design import (
    CLIENT_MODES,
    MAX_REPLICAS,
    SYNC_LEVELS,
    DesignOptions,
    parse_client,
    parse_latency_ms,
    parse_sync,
)
from howfast.errors import UsageError
from howfast.plans import Overrides, parse_int_list, parse_set_option
from howfast.plugin.events import event_help, parse_event
from howfast.service.requests import (
    LiveMetrics,
    RunRequest,
    SamplingOptions,
    TargetRunOptions,
    UntilOptions,
)
from howfast.service.run import RunService
from howfast.slo import split_slo
from howfast.units import parse_duration, parse_size
from howfast.workloads.pgbench.plan import parse_modes


@dataclass(frozen=True)
class RunOptions:
    """`howfast run`'s options as click gives them (cli/options.py `gathered`), one field
    each; run_request_of parses them into the service's RunRequest."""

    plan: str
    targets: tuple[str, ...]
    store: str | None
    sets: tuple[str, ...]
    scale: int | None
    dataset: str | None
    memory: str | None
    clients: str | None
    duration: str | None
    modes: str | None
    repeat: int | None
    trials: int | None
    until: str | None
    budget: str | None
    wal_dir: Path | None
    keep: bool
    replicas: int | None
    sync: str | None
    standby_dirs: tuple[Path, ...]
    standby_latency: str | None
    client: str | None
    client_node: str | None
    dry_run: bool
    yes: bool
    pg_bin: str | None
    checksums: bool
    label: str | None
    rate: float | None
    rates: str | None
    slo: str | None
    events: tuple[str, ...]
    sample_interval: str
    metrics_port: int | None
    metrics_address: str | None
    prometheus_url: str | None
    in_cluster: bool
    howfast_image: str | None
    as_json: bool
    kind_given: Mapping[str, str | None]  # the target kinds' own options (--namespace...)


@click.command("run", cls=RawArgsCommand)
@click.argument("plan", default="quick")
@click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="T",
    callback=check_path_value,
    help="A directory (howfast creates a throwaway cluster inside it), a postgresql:// URI "
    "of an existing server, or k8s://STORAGECLASS (a pod on a volume of that class; "
    "k8s://CLASS?wal=CLASS2, k8s://emptyDir[?medium=Memory]). Repeat to compare targets.",
)
@target_kind_options("run")
@store_option
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="NAME=VALUE",
    help="A postgresql.conf setting for clusters howfast creates (repeatable).",
)
@click.option("--scale", type=int, help="pgbench scale factor (overrides the plan).")
@click.option(
    "--dataset",
    metavar="REGIME|SIZE",
    help="Size the pgbench data for a working-set regime instead of a scale: in-buffers, "
    "in-memory, on-disk (4x memory), or a size such as 20GiB.",
)
@click.option(
    "--memory",
    metavar="SIZE",
    help="Run each directory target's server in a cgroup capped at SIZE (e.g. 1GiB): "
    "emulates a machine with that much memory. Needs root and cgroups. k8s:// targets: the "
    "server container's memory request and limit.",
)
@click.option("--clients", metavar="1,2,4", help="Client counts (overrides the plan).")
@click.option("--duration", metavar="10s", help="Duration of each pgbench step (overrides).")
@click.option("--modes", metavar="select-only,tpcb-like", help="pgbench modes (overrides).")
@click.option(
    "--repeat",
    type=int,
    help="Run each measuring step N times (with --until: at least N times).",
)
@click.option(
    "--trials",
    type=int,
    metavar="N",
    help="Run each pgbench step that has events as N short trials (a window of load to the "
    "last event plus 8 s, the design restored between them): how often an event loses "
    "commits, and its outage's spread. See docs/events.md.",
)
@click.option(
    "--until",
    metavar="ci=2%",
    help="Repeat each measuring test, targets interleaved (A B B A ...), until the 95% "
    "interval of its figures is within ±N% of the mean (at least 3, at most 30 times; "
    "ci=2%,max=20 sets the maximum). See docs/commands/run.md.",
)
@click.option(
    "--budget",
    metavar="10m",
    help="With --until: stop repeating when this much of the run's time is spent, and say "
    "which figures did not reach the width.",
)
@click.option(
    "--wal-dir",
    callback=checked_path,
    help="Put WAL in a directory on another storage (directory targets only).",
)
@click.option("--keep", is_flag=True, help="Keep the cluster (stopped) instead of removing it.")
@click.option(
    "--replicas",
    type=click.IntRange(0, MAX_REPLICAS),
    metavar="N",
    help="Give each cluster howfast creates N standbys, built with pg_basebackup and streaming "
    "before the steps (a target's own ?replicas= wins). See docs/replication.md.",
)
@click.option(
    "--sync",
    type=click.Choice(SYNC_LEVELS),
    help="The standbys' synchronous-commit level: off (asynchronous standbys), local, "
    "remote_write, on, remote_apply [default: on with --replicas].",
)
@click.option(
    "--standby-dir",
    "standby_dirs",
    multiple=True,
    callback=lambda ctx, param, values: tuple(checked_path(ctx, param, v) for v in values),
    metavar="DIR",
    help="Put the standbys in this directory (once for all, or once per standby) instead "
    "of beside the primary's data.",
)
@click.option(
    "--standby-latency",
    metavar="2ms",
    help="Put each standby on an emulated volume of its own with this much added latency "
    "(emulates a remote node's disk; needs root).",
)
@click.option(
    "--client",
    "client",
    type=click.Choice(CLIENT_MODES),
    help="Where pgbench and the round-trip probe run and how they reach a server howfast "
    "creates. Directory targets: socket (Unix socket) or tcp (127.0.0.1, password-protected) "
    "[default: socket]; k8s:// targets: pod (a client pod of their own) or same-pod (in the "
    "server's pod) [default: pod]. A target's own ?client= wins. See docs/commands/run.md.",
)
@click.option(
    "--client-node",
    metavar="NODE",
    help="k8s:// targets: put the client pod on this node (--client pod).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print every command each step would run (with --json: as data); create nothing.",
)
@click.option(
    "--yes",
    is_flag=True,
    help="Allow re-initialising pgbench tables on a server URI, and a drain event to cordon "
    "a Kubernetes node.",
)
@click.option(
    "--pg-bin",
    metavar="DIR",
    callback=check_path_value,
    help="PostgreSQL bin directory [default: newest found].",
)
@click.option(
    "--checksums/--no-checksums",
    default=False,
    show_default=True,
    help="initdb with data checksums.",
)
@click.option("--label", help="A note stored with the run, e.g. 'ceph rbd 3 replicas'.")
@click.option(
    "--rate",
    type=float,
    metavar="TPS",
    help="Offer this fixed rate (pgbench --rate) in every pgbench step.",
)
@click.option(
    "--rates",
    metavar="500,1000,2000",
    help="Offered rates for every pgbench step, one step each, instead of the plan's.",
)
@click.option(
    "--slo",
    metavar="p99=10ms|rto=10s,rpo=0",
    help="A latency objective (avg, p50, p90, p95, p99, p99.9): each step says "
    "whether it was met, a rate curve the highest rate that met it. Failure objectives "
    "(rto: the longest outage, rpo: the most commits lost) judge every trial of an event.",
)
@click.option(
    "--event",
    "events",
    multiple=True,
    metavar="AT:ACTION",
    cls=LazyHelpOption,
    lazy_help=event_help,  # every registered action's form (plugin/events.py)
)
@click.option(
    "--sample-interval",
    metavar="1s",
    default="1s",
    show_default=True,
    help="How often the samplers read disks, CPU and PostgreSQL statistics during pgbench "
    "and fio steps; 0 turns sampling off.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Serve live Prometheus metrics on /metrics at this port while the run lasts "
    "(0: any free port). See docs/prometheus.md.",
)
@click.option(
    "--metrics-address",
    metavar="ADDR",
    help="The address --metrics-port listens on [default: 127.0.0.1].",
)
@click.option(
    "--prometheus",
    "prometheus_url",
    metavar="URL",
    help="After each sampled step, read node_exporter (and postgres_exporter) series of the "
    "step's time window from this Prometheus server's HTTP API.",
)
@click.option(
    "--in-cluster",
    is_flag=True,
    help="k8s:// targets: run howfast itself in the cluster, as a Job with these arguments "
    "(a ServiceAccount and a Role limited to the namespace come with it); its progress "
    "shows here, its run comes back into the store, everything is deleted after (also on "
    "Ctrl-C). See docs/commands/run.md.",
)
@click.option(
    "--howfast-image",
    metavar="IMAGE",
    help="With --in-cluster: the image of howfast the Job runs (deploy/Dockerfile.howfast) "
    "[default: $HOWFAST_K8S_HOWFAST_IMAGE].",
)
@json_option
@pass_env
@gathered(RunOptions)
def run_command(env: CliEnv, options: RunOptions) -> int:
    """Run PLAN (a built-in name or a TOML file; default: quick) on each --target.

    \b
    Examples:
      howfast run quick --target /mnt/nvme/bench --target /mnt/ceph/bench
      howfast run quick --target postgresql://bench@db:5432/bench --yes
      howfast run sweep --target /mnt/a --clients 1,4,16 --duration 60s
      howfast run quick --target /mnt/a --dry-run
      howfast run quick --target k8s://longhorn --target k8s://longhorn-noreplica
      howfast run sweep --target k8s://fast-ssd?wal=local-nvme --namespace bench
    """
    request = run_request_of(options)
    if options.in_cluster:
        from howfast.cli.in_cluster import run_in_cluster  # a Job's: k8s:// targets only

        return run_in_cluster(
            env,
            request,
            options.store,
            options.as_json,
            image=options.howfast_image,
            kube=kind_values("run", options.kind_given),
            metrics_port=options.metrics_port,
        )
    if options.howfast_image is not None:
        raise UsageError("--howfast-image goes with --in-cluster")
    return run_request(env, request, options.store, options.as_json)


def run_request_of(options: RunOptions) -> RunRequest:
    """The typed request of `run`'s options: every value parsed (a bad one: a UsageError
    naming its option)."""
    return RunRequest(
        plan=options.plan,
        targets=options.targets,
        overrides=_overrides(options),
        target_options=TargetRunOptions(
            pg_bin=options.pg_bin,
            wal_dir=options.wal_dir,
            keep=options.keep,
            overwrite=options.yes,
            checksums=options.checksums,
            memory_bytes=parse_size(options.memory, "--memory") if options.memory else None,
            kind_values=kind_values("run", options.kind_given),
            design=_design(options),
        ),
        label=options.label,
        sampling=SamplingOptions(_sample_interval(options.sample_interval), options.prometheus_url),
        until=UntilOptions(options.until, options.budget),
        live_metrics=LiveMetrics(options.metrics_port, options.metrics_address),
        dry_run=options.dry_run,
        failure_slo=split_slo(options.slo)[1] if options.slo else None,
    )


def _overrides(options: RunOptions) -> Overrides:
    """What the options change in the plan."""
    clients, duration, modes = options.clients, options.duration, options.modes
    return Overrides(
        scale=options.scale,
        clients=parse_int_list(clients, "--clients") if clients else None,
        duration_s=parse_duration(duration, "--duration") if duration else None,
        modes=parse_modes(modes, "--modes") if modes else None,
        repeat=options.repeat,
        trials=options.trials,
        settings=dict(parse_set_option(s) for s in options.sets),
        rate=options.rate,
        rates=_parse_rates(options.rates) if options.rates else None,
        slo=split_slo(options.slo)[0] if options.slo else None,  # the latency part
        dataset=options.dataset,
        events=tuple(parse_event(e) for e in options.events) if options.events else None,
    )


def _design(options: RunOptions) -> DesignOptions:
    """--replicas, --sync, --standby-dir, --standby-latency, --client, --client-node."""
    latency = options.standby_latency
    return DesignOptions(
        replicas=options.replicas,
        sync=parse_sync(options.sync, "--sync") if options.sync else None,
        standby_dirs=tuple(options.standby_dirs),
        standby_latency_ms=(
            parse_latency_ms(latency, "--standby-latency") if latency is not None else None
        ),
        client=parse_client(options.client, "--client") if options.client else None,
        client_node=options.client_node,
    )


def run_request(env: CliEnv, request: RunRequest, store: str | None, as_json: bool) -> int:
    """Prepare the run; print it (--dry-run) or run it with progress, then print it."""
    service = RunService(env.service(store))
    prepared = service.prepare(request)
    if request.dry_run:
        return print_dry_run(env, prepared, as_json)
    return finish(env, service.execute(prepared, progress(env, prepared), for_people=not as_json),
                  as_json)  # fmt: skip


def _sample_interval(text: str) -> float | None:
    """Seconds between samples; None for "0" (sampling off). Below 0.1 s the samplers would
    cost more than they tell."""
    if text.strip() in ("0", "0s", "off"):
        return None
    seconds = parse_duration(text, "--sample-interval")
    if seconds < 0.1:
        raise UsageError(f"--sample-interval must be at least 100ms (or 0 for off), got {text}")
    return seconds


def _parse_rates(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"--rates {text!r}: expected numbers such as 500,1000,2000") from None
    if not values:
        raise UsageError("--rates needs at least one rate")
    return values
