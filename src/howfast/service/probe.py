"""`howfast probe DIR|k8s://CLASS` as a run: what the storage itself does, before any
PostgreSQL runs on it. The probe is the run of a generated plan, `probe`: one step per fio
profile and one of pg_test_fsync (those two tools are what "probe" means: DESIGN.md's public
CLI), on a directory (a PathTarget) or a volume of a StorageClass (a pod without a server).
"""

from __future__ import annotations

import dataclasses

from howfast.errors import MissingToolError, UsageError
from howfast.hosts.local import LocalHost
from howfast.machine.pgbin import INSTALL_HINT, PgInstall, find_installs
from howfast.model import StepSpec
from howfast.service.env import ServiceEnv
from howfast.service.installs import NO_INSTALL
from howfast.service.prepared import PreparedRun
from howfast.service.requests import ProbeRequest
from howfast.targets import registry as target_kinds
from howfast.targets.kind import OptionContext, TargetOptions
from howfast.targets.path import PathTarget
from howfast.targets.userpaths import check_user_directories
from howfast.workloads.fio.build import list_profiles
from howfast.workloads.fio.workload import FIO_HINT, space_problem
from howfast.workloads.pg_test_fsync import workload as pg_test_fsync

PG_TEST_FSYNC = "pg_test_fsync"
PLAN_NAME = "probe"


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
    return NO_INSTALL  # the pg_test_fsync step is skipped


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
    """The probe's run, decided: its steps, its target (the kind's probe target) and
    install; UsageError (exit 2) for what cannot run. A directory's lock and room are checked
    when it runs (`before_store`)."""
    steps = probe_steps(
        chosen_profiles(request.profiles),
        request.size_bytes,
        request.runtime_s,
        request.fsync_seconds,
    )
    where, options = request.where, request.target_options
    kind_options = target_kinds.parse_kind_options(
        options.kind_values, OptionContext("probe", (where,))
    )
    install = NO_INSTALL  # every tool runs elsewhere (in a pod, from its image)
    if target_kinds.local_install([where]) != "none":  # the tools run on this machine
        check_user_directories([where], role="probe directory")
        install = probe_install(options.pg_bin)
    made = TargetOptions(install, keep=options.keep, kind_options=kind_options)
    target = target_kinds.probe_target(where, made)
    target.check_inputs()  # the same refusals for a probe and its --dry-run (issue 35)
    probe = PreparedRun(
        command="howfast probe",
        plan_name=PLAN_NAME,
        install=install,
        steps=tuple(steps),
        targets=(target,),
        label=request.label,
    )
    if not isinstance(target, PathTarget):
        return probe
    directory = target  # its own checks, and its own --dry-run --json shape

    def check_directory() -> None:
        directory.check(will_init=False)
        try:
            refuse_what_cannot_run(directory, steps, LocalHost())
        except BaseException:
            directory.stop()  # gives back the directory lock that check() took
            raise

    return dataclasses.replace(
        probe,
        before_store=None if request.dry_run else check_directory,
        probe_directory=directory.directory,
    )
