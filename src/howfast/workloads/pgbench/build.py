"""Pure builders of pgbench argument lists from a step's params (see docs/json.md)."""

from __future__ import annotations

import math
from pathlib import PurePath

from howfast.hosts.base import Invocation
from howfast.model import JSONValue
from howfast.plugin import registry
from howfast.targets.base import Connection

LOG_DIR = "txlog"  # in the step's private work directory, never on the storage under test
LOG_PREFIX = PurePath(LOG_DIR) / "tx"

BUILTIN_MODES = ("tpcb-like", "simple-update", "select-only")


def resolve_jobs(clients: int, cores: int, requested: int | None = None) -> int:
    """pgbench threads: as asked, else min(clients, cores) lowered to a divisor of clients
    (older pgbench versions require clients to be a multiple of threads)."""
    if requested:
        return requested
    jobs = max(1, min(clients, cores))
    while clients % jobs:
        jobs -= 1
    return jobs


def init_argv(
    pgbench: str | PurePath, params: dict[str, JSONValue], conn_args: list[str]
) -> list[str]:
    argv = [str(pgbench), "-i", "-s", str(params["scale"])]
    if params.get("generate") == "server":
        argv += ["-I", "dtGvp"]  # drop, tables, server-side generate, vacuum, primary keys
    fillfactor = params.get("fillfactor")
    if fillfactor is not None and int(fillfactor) != 100:
        argv += ["-F", str(fillfactor)]
    partitions = params.get("partitions")
    if partitions:
        argv += ["--partitions", str(partitions)]
        argv += ["--partition-method", str(params.get("partition_method", "range"))]
    argv += [str(a) for a in params.get("extra_args") or []]
    return argv + conn_args


def statement_latencies(params: dict[str, JSONValue]) -> bool:
    """Whether pgbench reports per-statement latencies (-r): as the plan says
    (`statement_latencies`), else for every mode but select-only, whose one cheap statement
    per transaction is where timing each statement weighs most and tells least."""
    asked = params.get("statement_latencies")
    if isinstance(asked, bool):
        return asked
    return bool(params.get("mode", "tpcb-like") != "select-only")


def run_argv(
    pgbench: str | PurePath,
    params: dict[str, JSONValue],
    *,
    jobs: int,
    log_prefix: PurePath | None,
    conn_args: list[str],
    progress: bool = True,
) -> list[str]:
    """A measuring pgbench run: per-second progress (-P 1, unless `progress` is false: see
    logsampling.PROGRESS_MAX_TPS), the per-transaction log (-l)
    written under `log_prefix`, a random sample of it when `log_sampling_rate` is below 1
    (workloads/pgbench/logsampling.py), and per-statement latencies (-r) where
    statement_latencies() says. Without a `log_prefix`: the bare command (no -P, -r, -l), as
    the calibration run that measures the rate to sample at."""
    argv = [str(pgbench)]
    mode = params.get("mode", "tpcb-like")
    if mode == "custom":
        for script in params.get("scripts") or []:
            argv += ["-f", str(script)]
    else:
        argv += ["-b", str(mode)]
    argv += ["-c", str(params["clients"]), "-j", str(jobs)]
    if params.get("transactions") is not None:
        argv += ["-t", str(params["transactions"])]
    else:
        argv += ["-T", str(max(1, math.ceil(float(params.get("duration_s") or 10))))]
    if log_prefix is not None:
        if progress:
            argv += ["-P", "1"]
        if statement_latencies(params):
            argv.append("-r")
        argv += ["-l", f"--log-prefix={log_prefix}"]
        sampling = params.get("log_sampling_rate")
        if isinstance(sampling, str) or (isinstance(sampling, int | float) and sampling < 1):
            argv.append(f"--sampling-rate={sampling}")
    if params.get("rate") is not None:
        argv += ["-R", str(params["rate"])]
    if params.get("latency_limit_ms") is not None:
        argv += ["-L", str(params["latency_limit_ms"])]
    if params.get("protocol"):
        argv += ["-M", str(params["protocol"])]
    argv += [str(a) for a in params.get("extra_args") or []]
    return argv + conn_args


def init_invocation(
    pgbench: str | PurePath, params: dict[str, JSONValue], conn: Connection
) -> Invocation:
    """`pgbench -i` as it runs: the password travels in the secret environment only."""
    scale = params.get("scale")
    return Invocation(
        tuple(init_argv(pgbench, params, conn.pgbench_args())),
        env=conn.options_env(),
        secret_env=conn.secret_env(),
        expected_s=registry.expected_seconds("pgbench-init", params)
        if isinstance(scale, int)
        else None,
    )


def run_invocation(
    pgbench: str | PurePath,
    params: dict[str, JSONValue],
    *,
    jobs: int,
    conn: Connection,
    progress: bool = True,
) -> Invocation:
    """A measuring pgbench run; its per-transaction logs are collected from the work
    directory afterwards."""
    duration = params.get("duration_s")
    return Invocation(
        tuple(
            run_argv(
                pgbench,
                params,
                jobs=jobs,
                log_prefix=LOG_PREFIX,
                conn_args=conn.pgbench_args(),
                progress=progress,
            )
        ),
        env=conn.options_env(),
        secret_env=conn.secret_env(),
        dirs=(LOG_DIR,),
        outputs=(f"{LOG_PREFIX}*",),
        expected_s=registry.expected_seconds("pgbench", params),
        timeout_s=float(duration) * 3 + 300 if isinstance(duration, int | float) else None,
    )


def calibration_invocation(
    pgbench: str | PurePath, params: dict[str, JSONValue], *, jobs: int, conn: Connection
) -> Invocation:
    """The short bare run that measures the rate a step's log is sampled at."""
    return Invocation(
        tuple(run_argv(pgbench, params, jobs=jobs, log_prefix=None, conn_args=conn.pgbench_args())),
        env=conn.options_env(),
        secret_env=conn.secret_env(),
        expected_s=registry.expected_seconds("pgbench", params),
        timeout_s=300.0,
    )
