"""Executor for fio: check the directory, build the job file, run fio, parse it, clean up.

The job file comes from build.py and the numbers from parse.py. What lives here needs the
machine: the test file goes in the target's scratch directory (on the storage under test);
the job file, fio's JSON and its per-second logs go in the step's private work directory
(never the disk under test); whether the filesystem takes direct I/O; whether the file fits;
and removing the file whatever happens, Ctrl-C included.

The trust rules (direct I/O or not, the warnings, the commit-rate ceiling) are pure, in
checks.py: fio's part of reading a run (analysis.py) applies them again to stored and imported
steps.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath

from howfast.hosts.base import Host, Invocation, ToolResult
from howfast.model import JSONValue, Sample
from howfast.targets.capabilities import HasStorage
from howfast.units import format_bytes
from howfast.workloads.base import (
    PlanContext,
    PlannedInvocation,
    StepContext,
    StepOutcome,
    Workload,
)
from howfast.workloads.fio.build import PREFILL_JOB, build_argv, build_jobfile, fio_file_path
from howfast.workloads.fio.checks import (
    IoChoice,
    choose_direct,
    flushes_every_write,
    prefill_shortfall,
)
from howfast.workloads.fio.parse import (
    FigureError,
    FioJob,
    extract_json,
    log_series,
    parse_output,
)
from howfast.workloads.fio.plan import PLUGIN

MIB = 1 << 20
FIO_HINT = "install it with: sudo apt-get install -y fio"
TAIL_LINES = 8

_LIBAIO_UNAVAILABLE = re.compile(r"engine libaio not loadable|io_queue_init|aio-max-nr")
LOG_DIR = "logs"  # fio's per-second logs, in the step's private work directory
OUTPUT_FILE = "output.json"


# --- pure helpers ---------------------------------------------------------------------------


def space_needed(size_bytes: int) -> int:
    """Room for the test file and the filesystem's own bookkeeping: the size plus 1% + 1 MiB."""
    return size_bytes + size_bytes // 100 + MIB


def space_problem(directory: Path, size_bytes: int, free: int | None) -> str | None:
    """The refusal to print when a file of size_bytes does not fit; None when it does or when
    the filesystem does not say (free is None: ramfs and some virtual filesystems)."""
    needed = space_needed(size_bytes)
    if free is None or free >= needed:
        return None
    return (
        f"not enough free space in {directory}: the test file needs {format_bytes(needed)} "
        f"({format_bytes(size_bytes)} plus 1% and 1 MiB for the filesystem), "
        f"{format_bytes(free)} free; give a smaller size or free some space"
    )


def prefill_written_bytes(output: str) -> int | None:
    """Bytes howfast's prefill job wrote; None when fio's output has no prefill job."""
    for job in extract_json(output)["jobs"]:
        if job.get("jobname") == PREFILL_JOB:
            write = job.get("write")
            return int(write.get("io_bytes", 0)) if isinstance(write, dict) else 0
    return None


def prefill_warning(output: str, size_bytes: int) -> str | None:
    """Warn when the prefill job did not write the whole file: reads of unwritten blocks
    return zeros without touching the device."""
    return prefill_shortfall(prefill_written_bytes(output), size_bytes)


def histograms_us(histograms_ns: Mapping[str, Mapping[int, int]]) -> dict[str, dict[int, int]]:
    """fio's ns-keyed bins as the store keeps latency histograms: whole microseconds
    (rounded), named like 'write_lat_us'. Bins that round to the same µs are added up."""
    result: dict[str, dict[int, int]] = {}
    for name, bins in histograms_ns.items():
        counts: dict[int, int] = defaultdict(int)
        for ns, count in bins.items():
            counts[(ns + 500) // 1000] += count
        result[f"{name}_us"] = dict(counts)
    return result


def fio_command(fio: str | PurePath, job_path: PurePath, output_path: PurePath) -> list[str]:
    """fio's argv as howfast runs it: build.py's, with the jobs as threads of one process
    rather than forked processes in their own sessions, so that stopping fio's PID on Ctrl-C
    stops every job and none is left writing the file."""
    argv = build_argv(fio, job_path, output_path)
    argv.insert(1, "--thread")
    return argv


def fio_invocation(
    fio: str,
    profile: str,
    *,
    scratch: PurePath,
    size: int,
    runtime: int,
    direct: bool,
    ioengine: str | None = None,
) -> Invocation:
    """fio as it runs: the job file is written into the work directory first; fio's JSON
    output and its per-second logs are collected from there."""
    jobfile = build_jobfile(
        profile,
        directory=scratch,
        size_bytes=size,
        runtime_s=runtime,
        direct=direct,
        log_dir=LOG_DIR,
        ioengine=ioengine,
    )
    job_name = f"{profile}.fio"
    return Invocation(
        tuple(fio_command(fio, PurePath(job_name), PurePath(OUTPUT_FILE))),
        dirs=(LOG_DIR,),
        inputs={job_name: jobfile},
        outputs=(OUTPUT_FILE, f"{LOG_DIR}/*"),
        expected_s=runtime + 1.0,
    )


def error_tail(result: ToolResult, what: str) -> str:
    """What fio (or pg_test_fsync) said when it failed: exit status and its last lines."""
    if result.returncode < 0:
        head = f"{what} was killed by {signal.Signals(-result.returncode).name}"
    else:
        head = f"{what} exited with status {result.returncode}"
    lines = [line for line in (result.stderr + "\n" + result.stdout).splitlines() if line.strip()]
    return head + (":\n" + "\n".join(lines[-TAIL_LINES:]) if lines else "")


# --- machine-facing helpers -----------------------------------------------------------------


@contextlib.contextmanager
def ticking(
    on_progress: Callable[[float, dict[str, float]], None], interval_s: float = 1.0
) -> Iterator[None]:
    """Report elapsed time every second while a tool that prints no progress runs."""
    stop = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        while not stop.wait(interval_s):
            on_progress(time.monotonic() - started, {})

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)


# --- the workload ---------------------------------------------------------------------------


@dataclass
class _Attempt:
    result: ToolResult
    output: str  # fio's JSON output ("" when it wrote none)
    logs: dict[str, str]  # per-second log files by name


class FioWorkload(Workload):
    name = "fio"
    needs_server = False

    def label(self, params: dict[str, JSONValue]) -> str:
        return PLUGIN.label(params)

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        profile = str(params["profile"])
        size = int(params["size_bytes"])
        runtime = int(params["runtime_s"])
        scratch = ctx.target.scratch_dir() if isinstance(ctx.target, HasStorage) else None
        if scratch is None:
            return StepOutcome(
                status="skipped",
                error=f"{ctx.target.name} has no directory on the storage under test "
                "(an existing server): fio needs one",
            )
        host = ctx.host
        fio = host.program("fio")
        if fio is None:
            return StepOutcome(status="skipped", error=f"fio is not installed ({FIO_HINT})")
        problem = space_problem(scratch, size, host.free_bytes(scratch))
        if problem:
            return StepOutcome(status="failed", error=problem)
        fstype = host.fstype(scratch)
        refused = host.direct_io_refused(scratch)
        choice = choose_direct(fstype, refused)
        warnings: list[str] = []
        test_file = Path(fio_file_path(scratch))
        try:
            with ticking(ctx.on_progress):
                attempt = self._run(ctx, fio, profile, scratch, size, runtime, choice)
                failed = attempt.result.returncode != 0
                said = attempt.result.stderr + attempt.result.stdout
                unavailable = _LIBAIO_UNAVAILABLE.search(said) if failed else None
                if unavailable:
                    warnings.append(
                        f"libaio is not available here (fio: {unavailable[0]}): fio used psync, "
                        "one I/O at a time, so queue depths above 1 were not tested"
                    )
                    attempt = self._run(ctx, fio, profile, scratch, size, runtime, choice, "psync")
        except ValueError as exc:  # an unknown profile in a plan, or an impossible size
            return StepOutcome(status="failed", error=str(exc))
        finally:
            host.remove_file(test_file)
        return _outcome(attempt, profile, size, scratch, fstype, choice, warnings, host, refused)

    def _run(
        self,
        ctx: StepContext,
        fio: str,
        profile: str,
        scratch: Path,
        size: int,
        runtime: int,
        choice: IoChoice,
        ioengine: str | None = None,
    ) -> _Attempt:
        invocation = fio_invocation(
            fio,
            profile,
            scratch=scratch,
            size=size,
            runtime=runtime,
            direct=choice.direct,
            ioengine=ioengine,
        )
        result = ctx.run(invocation, subdir=ioengine or "fio")
        output_path = result.files.get(OUTPUT_FILE)
        output = output_path.read_text(errors="replace") if output_path else ""
        logs = {
            PurePath(name).name: path.read_text(errors="replace")
            for name, path in result.files.items()
            if name.startswith(LOG_DIR + "/")
        }
        return _Attempt(result, output, logs)

    def planned(self, ctx: PlanContext, params: dict[str, JSONValue]) -> list[PlannedInvocation]:
        if ctx.scratch_dir is None:
            return [PlannedInvocation(None, "skipped: the target has no directory for fio")]
        invocation = fio_invocation(
            ctx.host.program("fio") or "fio",
            str(params["profile"]),
            scratch=ctx.scratch_dir,
            size=int(params["size_bytes"]),
            runtime=int(params["runtime_s"]),
            direct=True,
        )
        return [
            PlannedInvocation(
                invocation,
                "direct=0 instead where the filesystem refuses direct I/O or keeps files in "
                "memory (tmpfs); ioengine=psync where libaio is not available",
            )
        ]


def _outcome(
    attempt: _Attempt,
    profile: str,
    size: int,
    scratch: Path,
    fstype: str | None,
    choice: IoChoice,
    warnings: list[str],
    host: Host,
    refused: bool,
) -> StepOutcome:
    result = attempt.result
    if result.returncode < 0:
        return StepOutcome(
            status="failed", error=error_tail(result, "fio"), warnings=tuple(warnings)
        )
    try:
        parsed = parse_output(attempt.output)
    except FigureError as exc:
        error = error_tail(result, "fio") + f"\n(fio's JSON holds a figure that is not one: {exc})"
        return StepOutcome(status="failed", error=error, warnings=tuple(warnings))
    except ValueError:
        error = error_tail(result, "fio") + "\n(no JSON results were written)"
        return StepOutcome(status="failed", error=error, warnings=tuple(warnings))
    job = next((j for j in parsed.jobs if j.name == profile), None)
    if job is None or job.error or result.returncode != 0:
        return StepOutcome(
            status="failed", error=_job_error(job, result, profile), warnings=tuple(warnings)
        )
    return StepOutcome(
        metrics=job_metrics(job),
        warnings=tuple(warnings),
        series={
            name: tuple(Sample(t, v) for t, v in points)
            for name, points in log_series(attempt.logs, unit=parsed.latency_unit).items()
        },
        histograms=histograms_us(job.histograms_ns),
        resolved_params={
            "direct": job.options.get("direct") == "1",
            "ioengine": job.options.get("ioengine", ""),
            "fio_version": parsed.fio_version,
            # Facts the trust warnings are derived from when the run is read
            # (workloads/fio/analysis.py)
            "fstype": fstype,
            "direct_refused": refused,
            "flushes_every_write": flushes_every_write(job.options),
            "machine_memory_bytes": _memory_bytes(host),
            "prefill_bytes": prefill_written_bytes(attempt.output),
        },
    )


def _memory_bytes(host: Host) -> int | None:
    basis = host.server_memory(None)
    return None if isinstance(basis, str) else basis.bytes


def job_metrics(job: FioJob) -> dict[str, JSONValue]:
    """DESIGN's fio metrics; the commit-rate ceiling is derived when the run is read."""
    return dict(job.metrics)


def _job_error(job: FioJob | None, result: ToolResult, profile: str) -> str:
    if job is None:
        return error_tail(result, "fio") + f"\n(no results for job {profile})"
    if job.error:
        reason = os.strerror(job.error)
        return f"fio: job {profile} failed with error {job.error} ({reason})\n" + error_tail(
            result, "fio"
        )
    return error_tail(result, "fio")
