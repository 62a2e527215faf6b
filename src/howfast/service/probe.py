"""`howfast probe DIR|k8s://CLASS` as a run: what the storage itself does, before any
PostgreSQL runs on it. The probe is the run of a generated plan, `probe`: one step per fio
profile and one of pg_test_fsync (those two tools are what "probe" means: DESIGN.md's public
CLI), on a directory (a PathTarget) or a volume of a StorageClass (a pod without a server).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from howfast.errors import MissingToolError, UsageError
from howfast.hosts.local import LocalHost
from howfast.machine.pgbin import INSTALL_HINT, PgInstall, find_installs
from howfast.model import StepSpec
from howfast.service import target_choice
from howfast.service.prepared import PreparedRun
from howfast.service.requests import ProbeRequest, ServiceEnv
from howfast.targets.base import Target
from howfast.targets.k8s.spec import K8sOptions, parse_target
from howfast.targets.path import PathTarget
from howfast.targets.userpaths import check_user_directories
from howfast.workloads.fio.build import list_profiles
from howfast.workloads.fio.workload import FIO_HINT, space_problem
from howfast.workloads.pg_test_fsync import workload as pg_test_fsync

PG_TEST_FSYNC = "pg_test_fsync"
PLAN_NAME = "probe"
NO_INSTALL = PgInstall(bindir=Path("/usr/lib/postgresql"), version="", source="none")


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
    return NO_INSTALL


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


def prepare_probe(env: ServiceEnv, request: ProbeRequest) -> PreparedRun:
    """The probe's run, decided: its steps, its target and install; UsageError (exit 2) for
    what cannot run. A directory's lock and room are checked when it runs (`before_store`)."""
    steps = probe_steps(
        chosen_profiles(request.profiles),
        request.size_bytes,
        request.runtime_s,
        request.fsync_seconds,
    )
    options = request.target_options
    kube = target_choice.kubernetes_options(
        options.kind_values, has_k8s=target_choice.has_k8s([request.where])
    )
    probe = PreparedRun(
        command="howfast probe",
        plan_name=PLAN_NAME,
        install=NO_INSTALL,
        steps=tuple(steps),
        targets=(),
        label=request.label,
    )
    if kube is not None:
        return _on_kubernetes(probe, request, kube)
    check_user_directories([request.where], role="probe directory")
    install = probe_install(options.pg_bin)
    target = PathTarget(Path(request.where).expanduser(), install=install, keep=options.keep)

    def check_directory() -> None:
        target.check(will_init=False)
        try:
            refuse_what_cannot_run(target, steps, LocalHost())
        except BaseException:
            target.stop()  # gives back the directory lock that check() took
            raise

    return dataclasses.replace(
        probe,
        install=install,
        targets=(target,),
        before_store=None if request.dry_run else check_directory,
        probe_directory=target.directory,
    )


def _on_kubernetes(probe: PreparedRun, request: ProbeRequest, kube: K8sOptions) -> PreparedRun:
    """The probes in a pod on a volume of the class (a PVC of --volume-size), deleted after."""
    from howfast.targets.k8s.target import K8sVolumeTarget

    spec = parse_target(request.where)
    if spec.wal is not None:
        raise UsageError("probe k8s://CLASS probes one class: drop ?wal=")
    if request.target_options.keep:
        raise UsageError("--keep applies to directories: a probe's volume is always deleted")
    target: Target = K8sVolumeTarget(spec, kube)
    return dataclasses.replace(probe, targets=(target,))
