"""`howfast probe DIR`: what the storage itself does, before any PostgreSQL runs on it.

Runs the fio profiles and pg_test_fsync in a subdirectory of DIR and stores the result as a run
(plan `probe`), one step per profile, like any other run (service/probe.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import click

from howfast.cli.context import CliEnv, pass_env
from howfast.cli.kind_options import kind_values, target_kind_options
from howfast.cli.options import check_path_value, gathered, json_option, store_option
from howfast.cli.output import finish, print_dry_run, progress
from howfast.errors import UsageError
from howfast.service.requests import DEFAULT_FSYNC_SECONDS, ProbeRequest, TargetRunOptions
from howfast.service.run import RunService
from howfast.units import parse_duration, parse_size
from howfast.workloads.pg_test_fsync.plan import TESTS

DEFAULT_SIZE = "1GiB"


@dataclass(frozen=True)
class ProbeOptions:
    """`howfast probe`'s options as click gives them (cli/options.py `gathered`)."""

    where: str
    profiles: tuple[str, ...]
    size: str
    runtime: str
    fsync_seconds: int
    dry_run: bool
    keep: bool
    pg_bin: str | None
    label: str | None
    store: str | None
    as_json: bool
    kind_given: Mapping[str, str | None]  # the target kinds' own options (--namespace...)


def _size(text: str) -> int:
    size = parse_size(text, "--size")
    if size % 8192:
        raise UsageError(f"--size must be a multiple of 8KiB (8192 bytes), got {size} bytes")
    return size


def _runtime(text: str) -> int:
    seconds = parse_duration(text, "--runtime")
    if seconds != int(seconds):
        raise UsageError(f"--runtime must be whole seconds, got {seconds:g}s")
    return int(seconds)


@click.command("probe")
@click.argument("where", metavar="DIR|k8s://CLASS", callback=check_path_value)
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    metavar="NAME",
    help="A fio profile, or pg_test_fsync (repeatable) [default: all of them]; "
    "see them with --dry-run.",
)
@click.option(
    "--size",
    default=DEFAULT_SIZE,
    show_default=True,
    metavar="SIZE",
    help="Size of fio's test file (a multiple of 8KiB).",
)
@click.option(
    "--runtime",
    default="10s",
    show_default=True,
    metavar="DURATION",
    help="How long each fio profile measures.",
)
@click.option(
    "--fsync-seconds",
    type=click.IntRange(min=1),
    metavar="N",
    default=DEFAULT_FSYNC_SECONDS,
    show_default=True,
    help=f"Seconds of each of pg_test_fsync's ~{TESTS} tests.",
)
@click.option("--dry-run", is_flag=True, help="Print the job files and commands; run nothing.")
@click.option("--keep", is_flag=True, help="Keep the howfast-* subdirectory (the files go).")
@click.option(
    "--pg-bin",
    metavar="DIR",
    callback=check_path_value,
    help="Where to find pg_test_fsync [default: newest].",
)
@click.option("--label", help="A note stored with the run, e.g. 'longhorn 3 replicas'.")
@target_kind_options("probe")
@store_option
@json_option
@pass_env
@gathered(ProbeOptions)
def probe_command(env: CliEnv, options: ProbeOptions) -> int:
    """Probe the storage behind DIR (or k8s://CLASS) with fio and pg_test_fsync; store it.

    DIR must exist and be empty (or hold only howfast's files). The probe writes a test file
    of --size in a subdirectory it creates, and removes both, also on Ctrl-C. With
    k8s://CLASS it creates a volume of that class and a pod that mounts it, runs the probes
    there, and deletes both.

    \b
    Examples:
      howfast probe /mnt/longhorn/bench
      howfast probe /mnt/nvme --profile wal-fsync --runtime 30s --json
      howfast probe /mnt/nvme --dry-run
      howfast probe k8s://longhorn --size 1GiB
    """
    request = ProbeRequest(
        where=options.where,
        profiles=options.profiles,
        size_bytes=_size(options.size),
        runtime_s=_runtime(options.runtime),
        fsync_seconds=options.fsync_seconds,
        target_options=TargetRunOptions(
            pg_bin=options.pg_bin,
            keep=options.keep,
            kind_values=kind_values("probe", options.kind_given),
        ),
        label=options.label,
        dry_run=options.dry_run,
    )
    service = RunService(env.service(options.store))
    prepared = service.prepare_probe(request)
    as_json = options.as_json
    if options.dry_run:
        return print_dry_run(env, prepared, as_json)
    return finish(env, service.execute(prepared, progress(env, prepared), for_people=not as_json),
                  as_json)  # fmt: skip
