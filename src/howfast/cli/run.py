"""`howfast run`: execute a plan on one or more targets and store the results."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from howfast.cli.context import CliEnv
from howfast.cli.fleet_run import refuse_with_fleet, run_fleet
from howfast.cli.k8s_options import NAMES as K8S_NAMES
from howfast.cli.k8s_options import build_options, kubernetes_options
from howfast.cli.live_metrics import live_metrics
from howfast.cli.options import check_path_value, checked_path, json_option, store_option
from howfast.cli.output import finish
from howfast.cli.progress import ProgressObserver
from howfast.cli.stores import open_results
from howfast.errors import UsageError
from howfast.machine.cgroup import detect, detect_io, remove_abandoned
from howfast.machine.memory import cap_floor_problem, memory_basis
from howfast.machine.pgbin import PgInstall, choose_install
from howfast.metrics.live import LINGER_S
from howfast.plans import (
    Overrides,
    Plan,
    effective_settings,
    expand,
    load_plan,
    parse_int_list,
    parse_set_option,
)
from howfast.plans.expand import expand_blocks
from howfast.plans.load import setting_locations
from howfast.plans.model import MAX_ADDED_LATENCY_MS, StorageSection, too_much_latency
from howfast.plans.until import UntilRule, make_rule
from howfast.plugin.registry import expected_seconds
from howfast.runner import Runner
from howfast.runner.fanout import FanOut
from howfast.samplers.prometheus import prometheus_samplers
from howfast.service.dryrun import plan_document, write_text
from howfast.targets.emulated.build import Limits, variants
from howfast.targets.emulated.target import emulated_variants
from howfast.targets.factory import is_dsn, make_target
from howfast.targets.kinds.k8s import is_k8s
from howfast.targets.pgsettings import SettingSource, check_settings, check_shared_memory
from howfast.targets.userpaths import check_run_targets
from howfast.units import parse_duration, parse_size
from howfast.workloads.pgbench.plan import parse_modes


@click.command("run")
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
@kubernetes_options
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
@click.option(
    "--storage-latency",
    metavar="2ms|0,1ms,2ms",
    help="Put each directory target's cluster on an emulated volume with this much added "
    "latency per read, write and flush (0.5ms works); a list runs one variant per value. "
    "Needs root.",
)
@click.option(
    "--storage-iops",
    metavar="N|500,20000",
    help="Cap the emulated volume's read and write IOPS (each); a list runs one variant per "
    "value. Needs root and cgroup I/O limits.",
)
@click.option(
    "--storage-size",
    metavar="SIZE",
    help="Size of the emulated volume, a sparse file in the target directory [default: the "
    "plan's [storage] size, else 4GiB].",
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
    "--dry-run",
    is_flag=True,
    help="Print every command each step would run (with --json: as data); create nothing.",
)
@click.option("--yes", is_flag=True, help="Allow re-initialising pgbench tables on a server URI.")
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
    metavar="p99=10ms",
    help="A latency objective (avg, p50, p90, p95, p99, p99.9): each step says "
    "whether it was met, a rate curve the highest rate that met it.",
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
@json_option
def run_command(
    plan: str,
    targets: tuple[str, ...],
    store: str | None,
    sets: tuple[str, ...],
    scale: int | None,
    dataset: str | None,
    memory: str | None,
    storage_latency: str | None,
    storage_iops: str | None,
    storage_size: str | None,
    clients: str | None,
    duration: str | None,
    modes: str | None,
    repeat: int | None,
    until: str | None,
    budget: str | None,
    wal_dir: Path | None,
    keep: bool,
    dry_run: bool,
    yes: bool,
    pg_bin: str | None,
    checksums: bool,
    label: str | None,
    rate: float | None,
    rates: str | None,
    slo: str | None,
    sample_interval: str,
    metrics_port: int | None,
    metrics_address: str | None,
    prometheus_url: str | None,
    as_json: bool,
    **kube_values: str | None,
) -> int:
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
    env = CliEnv()
    if not targets:
        raise UsageError("give at least one --target (a directory or a postgresql:// URI)")
    check_run_targets(targets, wal_dir)
    interval_s = _sample_interval(sample_interval)
    extra_samplers = prometheus_samplers(prometheus_url) if prometheus_url else []
    loaded = load_plan(plan)
    if metrics_port is None:
        metrics_port = loaded.metrics_port
    if metrics_address and metrics_port is None:
        raise UsageError("--metrics-address needs --metrics-port (or the plan's metrics_port)")
    overrides = Overrides(
        scale=scale,
        clients=parse_int_list(clients, "--clients") if clients else None,
        duration_s=parse_duration(duration, "--duration") if duration else None,
        modes=parse_modes(modes, "--modes") if modes else None,
        repeat=repeat,
        settings=dict(parse_set_option(s) for s in sets),
        rate=rate,
        rates=_parse_rates(rates) if rates else None,
        slo=slo,
        dataset=dataset,
    )
    rule = _until_rule(until, budget, loaded, repeat)
    if rule and loaded.fleet is not None:
        raise UsageError(
            "--until does not apply to a [fleet] plan (yet): its instances run side by side "
            "already; use --repeat"
        )
    if rule and any(is_k8s(t) for t in targets):
        raise UsageError(
            "--until is not supported with k8s:// targets (yet): every target's pod would stay "
            "up for the whole run; use --repeat"
        )
    blocks = expand_blocks(loaded, overrides) if rule else None
    if rule:  # --dry-run lists the rounds every test runs at least; progress starts there
        overrides = dataclasses.replace(overrides, repeat=rule.minimum)
    steps = expand(loaded, overrides)
    if dataset and not any(s.workload == "pgbench-init" for s in steps):
        raise UsageError(f"--dataset: plan {loaded.name!r} loads no data (no pgbench-init step)")
    memory_limit = parse_size(memory, "--memory") if memory else loaded.memory
    floor = memory_limit and cap_floor_problem(
        memory_limit, "--memory" if memory else "the plan's memory"
    )
    if floor:
        raise UsageError(floor)
    kube = build_options(
        {k: kube_values.get(k) for k in K8S_NAMES},
        has_k8s=any(is_k8s(t) for t in targets),
        memory_bytes=memory_limit,
    )
    needs_server = any(not is_dsn(t) and not is_k8s(t) for t in targets)
    if all(is_k8s(t) for t in targets):  # every tool runs in the pods, from their image
        install = PgInstall(bindir=Path("/usr/lib/postgresql"), version="", source="none")
    else:
        install = choose_install(pg_bin, need_server=needs_server)
        env.info(f"using PostgreSQL {install.version} from {install.bindir} ({install.source})")
    settings = effective_settings(loaded, overrides)
    if needs_server:  # the settings of clusters howfast creates: checked before anything is
        sources = [SettingSource(*located) for located in setting_locations(plan, loaded)] + [
            SettingSource(n, v, f"--set {n}={v}") for n, v in overrides.settings.items()
        ]  # created or stored, by the PostgreSQL that would read them, and against memory
        check_settings(install, sources)
        # The memory it needs is that of the value in force: a --set replaces the plan's.
        in_force = [
            s
            for s in sources
            if not (s.name in overrides.settings and s.where.endswith(f": settings.{s.name}"))
        ]
        check_shared_memory(in_force, memory_basis(memory_limit))
    if not dry_run and needs_server:  # only runs that make cgroups here tidy them up
        _remove_abandoned_cgroups(env)
    if loaded.fleet is not None:
        refuse_with_fleet(
            storage_latency=storage_latency or loaded.storage,
            storage_iops=storage_iops,
            memory=memory_limit if kube is None else None,  # a pod's limit: fine on k8s
            wal_dir=wal_dir,
            keep=keep,
            prometheus=prometheus_url,
        )
        return run_fleet(
            env,
            loaded,
            steps,
            targets,
            install,
            settings=settings,
            checksums=checksums,
            store=store,
            label=label,
            dry_run=dry_run,
            as_json=as_json,
            metrics=(metrics_port, metrics_address),
            kubernetes=kube,
        )
    variants = storage_variants(storage_latency, storage_iops, loaded.storage)
    if variants and wal_dir is not None:
        raise UsageError("--wal-dir cannot be combined with an emulated volume (yet)")
    target_objs = (
        emulated_variants(
            list(targets),
            install,
            variants,
            size_bytes=parse_size(storage_size, "--storage-size")
            if storage_size
            else (loaded.storage.size if loaded.storage else DEFAULT_VOLUME_BYTES),
            settings=settings,
            keep=keep,
            checksums=checksums,
            memory_limit=memory_limit,
        )
        if variants
        else [
            make_target(
                t,
                install,
                wal_dir=wal_dir,
                settings=settings,
                keep=keep,
                overwrite=yes,
                checksums=checksums,
                memory_limit=memory_limit,
                kubernetes=kube,
            )
            for t in targets
        ]
    )
    if dry_run:
        document = plan_document(target_objs, steps, install)
        if rule:
            document["until"] = {**rule.params(), "text": rule.text, "what": rule.describe()}
        if as_json:
            env.print_json(document)
        else:
            if rule:
                env.stdout.write(
                    f"# --until {rule.text}: {rule.describe()}; listed below: the first "
                    f"{rule.minimum} rounds, one target after the other\n"
                )
            write_text(document, "howfast run", env.stdout)
        return 0
    db = open_results(env, store)
    expected = sum(expected_seconds(s.workload, s.params) or 5.0 for s in steps) * len(target_objs)
    if rule and rule.budget_s:  # an --until run ends by its budget at the latest
        expected = min(expected, rule.budget_s)
    progress = ProgressObserver(env, expected)
    live = live_metrics(env, loaded.name, metrics_port, metrics_address)
    observer = FanOut(progress, live) if live else progress
    linger_s = 0.0
    try:
        runner = Runner(
            db,
            target_objs,
            steps,
            plan_name=loaded.name,
            install=install,
            observer=observer,
            label=label,
            sample_interval_s=interval_s,
            extra_samplers=extra_samplers,
            until=(rule, blocks) if rule and blocks is not None else None,
        )
        result = runner.execute()
        # Not after Ctrl-C: then the exporter stops at once.
        linger_s = LINGER_S if result.status != "aborted" else 0.0
    finally:
        progress.close()
        if live:  # one last scrape of the final figures, if something is scraping
            live.close(linger_s=linger_s)
    return finish(env, db, result, as_json)


def storage_variants(
    latency: str | None, iops: str | None, planned: StorageSection | None = None
) -> list[Limits]:
    """--storage-latency x --storage-iops, each a list, else the plan's [storage]; [] when
    neither asks for emulated volumes."""
    if latency is None and iops is None:
        if planned is None:
            return []
        return variants(planned.latency, [cap or None for cap in planned.iops])
    latencies = [0.0]
    if latency is not None:
        latencies = [
            0.0 if v.strip() in ("0", "0ms") else parse_duration(v, "--storage-latency") * 1000
            for v in latency.split(",")
        ]
        for text, ms in zip(latency.split(","), latencies, strict=True):
            if ms > MAX_ADDED_LATENCY_MS:
                raise UsageError(f"--storage-latency: {too_much_latency(text.strip())}")
    caps: list[int | None] = [None]
    if iops is not None:  # 0 (or "none") is a variant without a cap
        caps = [
            None if v.strip() in ("0", "none") else parse_int_list(v, "--storage-iops")[0]
            for v in iops.split(",")
        ]
    return variants(latencies, caps)


DEFAULT_VOLUME_BYTES = 4 * 1024**3


def _remove_abandoned_cgroups(env: CliEnv) -> None:
    """The empty cgroups (memory caps, I/O limits and accounting) that a howfast killed with
    SIGKILL left behind."""
    parents = {support.parent for support in (detect(), detect_io())}
    for parent in sorted(p for p in parents if p is not None):
        for path in remove_abandoned(parent):
            env.info(f"removed {path}: an empty cgroup left by a howfast that was killed")


def _until_rule(
    until: str | None, budget: str | None, plan: Plan, repeat: int | None
) -> UntilRule | None:
    """--until/--budget, else the plan's `until` and `budget`; --repeat (or the plan's
    `repeat`) is the minimum number of repetitions."""
    return make_rule(
        until if until is not None else plan.until,
        budget if budget is not None else plan.budget,
        repeat=repeat if repeat is not None else plan.repeat,
        until_option="the plan's until" if until is None and plan.until else "--until",
        budget_option="--budget" if budget is not None else "the plan's budget",
    )


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
