"""`howfast probe DIR`: what the storage itself does, before any PostgreSQL runs on it.

Runs the fio profiles and pg_test_fsync in a subdirectory of DIR and stores the result as a run
(plan `probe`), one step per profile, like any other run.
"""

from __future__ import annotations

from pathlib import Path

import click

from howfast.cli.context import CliEnv
from howfast.cli.k8s_options import NAMES as K8S_NAMES
from howfast.cli.k8s_options import build_options, kubernetes_options
from howfast.cli.options import check_path_value, json_option, store_option
from howfast.cli.output import finish
from howfast.cli.progress import ProgressObserver
from howfast.cli.stores import open_results
from howfast.errors import MissingToolError, UsageError
from howfast.hosts.local import LocalHost
from howfast.machine.pgbin import INSTALL_HINT, PgInstall, find_installs
from howfast.model import JSONValue, StepSpec
from howfast.plugin.registry import expected_seconds
from howfast.runner import Runner
from howfast.service.dryrun import plan_document, write_text
from howfast.targets.k8s.spec import K8sOptions
from howfast.targets.path import PathTarget
from howfast.targets.userpaths import check_user_directories
from howfast.units import parse_duration, parse_size
from howfast.workloads.fio.build import list_profiles
from howfast.workloads.fio.workload import FIO_HINT, space_problem
from howfast.workloads.pg_test_fsync import workload as pg_test_fsync
from howfast.workloads.pg_test_fsync.plan import TESTS

PG_TEST_FSYNC = "pg_test_fsync"
DEFAULT_SIZE = "1GiB"


def probe_names() -> list[str]:
    """What --profile accepts: the fio profiles, then pg_test_fsync."""
    return [p.name for p in list_profiles()] + [PG_TEST_FSYNC]


def chosen_profiles(given: tuple[str, ...]) -> list[str]:
    known = probe_names()
    unknown = [name for name in given if name not in known]
    if unknown:
        raise UsageError(
            f"unknown profile {', '.join(unknown)}", hint=f"choose from {', '.join(known)}"
        )
    return list(dict.fromkeys(given)) or known  # in the order given, each once


def probe_steps(
    profiles: list[str], size_bytes: int, runtime_s: int, fsync_seconds: int
) -> list[StepSpec]:
    steps = []
    for name in profiles:
        if name == PG_TEST_FSYNC:
            steps.append(StepSpec("pg_test_fsync", {"seconds": fsync_seconds}))
        else:
            params = {"profile": name, "size_bytes": size_bytes, "runtime_s": runtime_s}
            steps.append(StepSpec("fio", dict(params)))
    return steps


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


def probe_install(pg_bin: str | None) -> PgInstall:
    """The PostgreSQL install whose pg_test_fsync to use. Without one the probe still runs:
    its pg_test_fsync step is skipped."""
    installs = find_installs(pg_bin)
    if pg_bin and not any(i.source == "--pg-bin" for i in installs):
        raise MissingToolError(f"--pg-bin {pg_bin}: no PostgreSQL programs there", INSTALL_HINT)
    with_program = [i for i in installs if i.program("pg_test_fsync")]
    if pg_bin or not with_program:
        with_program = installs
    if with_program:
        return with_program[0]
    return PgInstall(bindir=Path("/usr/lib/postgresql"), version="", source="none")


def refuse_what_cannot_run(target: PathTarget, steps: list[StepSpec], host: LocalHost) -> None:
    """fio missing, or too little space for the test file: refused before the run exists."""
    fio_steps = [s for s in steps if s.workload == "fio"]
    if fio_steps and host.program("fio") is None:
        raise MissingToolError("fio not found on PATH", FIO_HINT)
    needed = max(
        [int(s.params["size_bytes"]) for s in fio_steps]
        + ([pg_test_fsync.FILE_BYTES] if len(fio_steps) < len(steps) else [])
    )
    problem = space_problem(target.directory, needed, host.free_bytes(target.directory))
    if problem:
        raise UsageError(problem)


def print_dry_run(
    env: CliEnv, target: PathTarget, steps: list[StepSpec], install: PgInstall, as_json: bool
) -> int:
    """Print what would run: each job file built for DIR and pg_test_fsync's command line,
    from the same builders as the run itself."""
    document = plan_document([target], steps, install)
    if not as_json:
        write_text(document, "howfast probe", env.stdout)
        return 0
    entries: list[JSONValue] = []
    (planned,) = document["targets"]
    for step in planned["steps"]:
        (invocation,) = step["invocations"]
        entry: dict[str, JSONValue] = {"workload": step["workload"], **invocation}
        if step["workload"] == "fio":
            profile = str(step["params"]["profile"])
            entry["profile"] = profile
            entry["jobfile"] = invocation["inputs"][f"{profile}.fio"]
        entries.append(entry)
    env.print_json({**document, "directory": str(target.directory), "steps": entries})
    return 0


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
    default=2,
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
@kubernetes_options
@store_option
@json_option
def probe_command(
    where: str,
    profiles: tuple[str, ...],
    size: str,
    runtime: str,
    fsync_seconds: int,
    dry_run: bool,
    keep: bool,
    pg_bin: str | None,
    label: str | None,
    store: str | None,
    as_json: bool,
    **kube_values: str | None,
) -> int:
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
    env = CliEnv()
    names = chosen_profiles(profiles)
    steps = probe_steps(names, _size(size), _runtime(runtime), fsync_seconds)
    kube = build_options(
        {k: kube_values.get(k) for k in K8S_NAMES}, has_k8s=where.startswith("k8s://")
    )
    if kube is not None:
        return _probe_k8s(env, where, kube, steps, dry_run, keep, label, store, as_json)
    check_user_directories([where], role="probe directory")
    directory = Path(where)
    install = probe_install(pg_bin)
    target = PathTarget(directory.expanduser(), install=install, keep=keep)
    host = LocalHost()
    if dry_run:
        return print_dry_run(env, target, steps, install, as_json)
    target.check(will_init=False)
    try:
        refuse_what_cannot_run(target, steps, host)
    except BaseException:
        target.stop()  # gives back the directory lock that check() took
        raise
    db = open_results(env, store)
    expected = sum(expected_seconds(s.workload, s.params) or TESTS * fsync_seconds for s in steps)
    observer = ProgressObserver(env, expected)
    try:
        runner = Runner(
            db, [target], steps, plan_name="probe", install=install, observer=observer, label=label
        )
        result = runner.execute()
    finally:
        observer.close()
    return finish(env, db, result, as_json)


def _probe_k8s(
    env: CliEnv,
    where: str,
    kube: K8sOptions,
    steps: list[StepSpec],
    dry_run: bool,
    keep: bool,
    label: str | None,
    store: str | None,
    as_json: bool,
) -> int:
    """The probes in a pod on a volume of the class (a PVC of --volume-size), deleted after."""
    from howfast.targets.k8s.spec import parse_target
    from howfast.targets.k8s.target import K8sVolumeTarget

    spec = parse_target(where)
    if spec.wal is not None:
        raise UsageError("probe k8s://CLASS probes one class: drop ?wal=")
    if keep:
        raise UsageError("--keep applies to directories: a probe's volume is always deleted")
    target = K8sVolumeTarget(spec, kube)
    install = PgInstall(bindir=Path("/usr/lib/postgresql"), version="", source="none")
    if dry_run:
        document = plan_document([target], steps, install)
        if as_json:
            env.print_json(document)
        else:
            write_text(document, "howfast probe", env.stdout)
        return 0
    db = open_results(env, store)
    expected = sum(expected_seconds(s.workload, s.params) or TESTS * 2 for s in steps)
    observer = ProgressObserver(env, expected)
    try:
        runner = Runner(
            db, [target], steps, plan_name="probe", install=install, observer=observer, label=label
        )
        result = runner.execute()
    finally:
        observer.close()
    return finish(env, db, result, as_json)
