"""`howfast probe`, `howfast import fio` and probe steps in plans, with real fio and
pg_test_fsync on tiny files (16-32 MiB, 1-2 s per profile).

Each `howfast` subprocess spends about 2 s importing before it does anything, so the file keeps
them for what needs a real process (measurements, Ctrl-C, stdin): the store is read in-process,
input errors and dry runs go through the CLI's `main` in-process, and the longest probe (every
profile plus pg_test_fsync, about 30 s) starts in the background when the module does, so that
the other tests run meanwhile.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from howfast.analysis.derive import derive_step
from howfast.cli import main
from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue, StepRecord
from howfast.report import terminal
from howfast.service.reading import read_run
from howfast.store import open_store
from howfast.targets.path import PathTarget
from howfast.workloads.base import StepContext, Workload
from howfast.workloads.fio.build import list_profiles
from howfast.workloads.fio.workload import FioWorkload
from howfast.workloads.pg_test_fsync.workload import PgTestFsyncWorkload
from tests.conftest import pg_bindir, shared_tmpdir
from tests.integration.conftest import Howfast

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed"),
]

DATA = Path(__file__).resolve().parents[1] / "data" / "fio"
PROFILES = [p.name for p in list_profiles()]
TINY = ["--size", "16MiB", "--runtime", "1s"]
IS_ROOT = os.geteuid() == 0


@pytest.fixture
def probe_dir() -> Iterator[Path]:
    """An empty directory on the machine's disk (/var/tmp)."""
    base = shared_tmpdir("howfast-probe-")
    target = base / "bench"
    target.mkdir()
    try:
        yield target
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def shm_dir() -> Iterator[Path]:
    """A fresh directory on /dev/shm (tmpfs)."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    target = Path(tempfile.mkdtemp(prefix="howfast-probe-test-", dir="/dev/shm"))
    try:
        yield target
    finally:
        shutil.rmtree(target, ignore_errors=True)


def mounted(fstype: str, options: list[str]) -> Iterator[Path]:
    """A fresh mount of fstype (root only); skipped where mounting is not allowed."""
    if not IS_ROOT:
        pytest.skip("needs root to mount a filesystem")
    base = shared_tmpdir(f"howfast-{fstype}-")
    point = base / "mnt"
    point.mkdir()
    out = subprocess.run(
        ["mount", "-t", fstype, *options, fstype, str(point)], capture_output=True, text=True
    )
    if out.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"cannot mount {fstype} here: {out.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def stored_runs(howfast: Howfast) -> list[tuple[int, str, int]]:
    """(id, status, steps) of each stored run, oldest first, read in-process."""
    if not howfast.store.exists():
        return []
    with open_store(str(howfast.store)) as db:
        return [(r.id, r.status, r.step_count) for r in reversed(db.list_runs())]


def stored_run_text(howfast: Howfast, run_id: int) -> str:
    """What `howfast results show RUN_ID` prints, rendered in-process."""
    with open_store(str(howfast.store)) as db:
        run = read_run(db, run_id)
    assert run is not None
    out = io.StringIO()
    Console(file=out, width=160, color_system=None).print(terminal.run_details(run))
    return out.getvalue()


@pytest.fixture
def cli(howfast: Howfast, capsys, monkeypatch):
    """The CLI's entry point called in-process with the test's store: (exit status, stdout,
    stderr). For commands that measure nothing."""
    monkeypatch.setenv("HOWFAST_STORE", str(howfast.store))

    def call(*args: str, stdin: str = "") -> tuple[int, str, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        status = main(list(args))
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return call


def run_step(workload: Workload, directory: Path, params: dict[str, JSONValue], work: Path):
    """One step run directly, as the runner does: on a PathTarget started and stopped
    around it, its private files in `work`."""
    install = PgInstall(Path("/nonexistent"), "", "none")
    target = PathTarget(directory, install=install)
    target.start()
    try:
        ctx = StepContext(target, None, install, work, host=target.host())
        return workload.execute(ctx, params)
    finally:
        target.stop()


def fake_fio(bin_dir: Path, script: str, monkeypatch) -> None:
    """Put a shell script named fio first on PATH; $job is the job file it was given."""
    bin_dir.mkdir()
    (bin_dir / "fio").write_text(f'#!/bin/sh\nfor a in "$@"; do job="$a"; done\n{script}')
    (bin_dir / "fio").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def assert_left_clean(directory: Path) -> None:
    """Nothing of the probe left: no subdirectory, no marker, no test file."""
    assert list(directory.iterdir()) == []


def open_files_under(directory: Path) -> list[str]:
    found = []
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            links = [os.readlink(fd) for fd in fd_dir.iterdir()]
        except OSError:
            continue
        found += [link for link in links if link.startswith(str(directory))]
    return found


# --- the path target -------------------------------------------------------------------------


def test_path_target_probes_in_its_own_subdirectory_and_removes_it(probe_dir: Path):
    target = PathTarget(probe_dir)
    target.check(will_init=False)
    assert target.start() is None  # no server
    scratch = target.scratch_dir()
    assert scratch is not None and scratch.parent == probe_dir
    assert scratch.name.startswith("howfast-") and (probe_dir / ".howfast-owned").exists()
    record = target.record()
    assert record.kind == "path" and record.location == str(probe_dir)
    assert record.device["data"]["path"] == str(scratch)
    target.stop()
    target.stop()  # idempotent
    assert target.scratch_dir() is None
    assert_left_clean(probe_dir)

    kept = PathTarget(probe_dir, keep=True)
    kept.start()
    kept.stop()
    assert sorted(p.name for p in probe_dir.iterdir()) == [".howfast-owned", kept.probe_dir.name]
    assert "kept" in str(kept.kept_message())
    PathTarget(probe_dir).check(will_init=False)  # a directory howfast used is accepted


# --- trust warnings ---------------------------------------------------------------------------


def test_tmpfs_is_probed_buffered_with_page_cache_and_memory_warnings(howfast, shm_dir):
    out = howfast("probe", str(shm_dir), "--profile", "randrw-4k-qd1", *TINY, "--json")
    assert out.returncode == 0, out.stderr
    (step,) = json.loads(out.stdout)["steps"]
    assert step["status"] == "completed" and step["params"]["direct"] is False
    warnings = step["warnings"]
    assert any("tmpfs, which lives in memory" in w for w in warnings)
    assert any("buffered I/O: tmpfs keeps files in memory" in w for w in warnings)
    assert any("smaller than memory" in w for w in warnings)
    assert "warning: " in out.stderr  # shown as the step ends
    assert_left_clean(shm_dir)


@pytest.fixture
def ramfs_dir() -> Iterator[Path]:
    yield from mounted("ramfs", [])


def test_a_filesystem_refusing_o_direct_falls_back_to_buffered_io(ramfs_dir, tmp_path):
    params: dict[str, JSONValue] = {"profile": "randrw-4k-qd1", "size_bytes": 2**24, "runtime_s": 1}
    outcome = run_step(FioWorkload(), ramfs_dir, params, tmp_path)
    assert outcome.status == "completed", outcome.error
    assert outcome.resolved_params["direct"] is False
    step = StepRecord(str(ramfs_dir), "fio", params, "completed", "", "", outcome.metrics,
                      outcome.warnings, resolved=outcome.resolved_params)  # fmt: skip
    # The trust warnings are derived from what the step recorded, when it is read.
    assert any("ramfs refuses direct I/O (O_DIRECT)" in w for w in derive_step(step, []).warnings)
    assert_left_clean(ramfs_dir)


# --- bad input and faults ---------------------------------------------------------------------


@pytest.fixture
def small_tmpfs() -> Iterator[Path]:
    yield from mounted("tmpfs", ["-o", "size=8m"])


def test_not_enough_free_space_is_refused_before_writing(cli, howfast, small_tmpfs):
    status, _, err = cli("probe", str(small_tmpfs), "--size", "16MiB", "--profile", "wal-fsync")
    assert status == 2
    assert "not enough free space" in err and "needs 17.2 MiB" in err and "MiB free" in err
    assert stored_runs(howfast) == []
    assert_left_clean(small_tmpfs)


def test_bad_input_is_refused_before_anything_runs(cli, howfast, probe_dir: Path):
    status, _, err = cli("probe", str(probe_dir), "--profile", "nope")
    assert status == 2 and "unknown profile nope" in err
    assert all(name in err for name in [*PROFILES, "pg_test_fsync"])
    status, _, err = cli("probe", str(probe_dir), "--size", "1000")
    assert status == 2 and "multiple of 8KiB" in err
    status, _, err = cli("probe", str(probe_dir / "nope"))
    assert status == 2 and "does not exist" in err
    (probe_dir / "precious.dat").write_text("user data")
    status, _, err = cli("probe", str(probe_dir))
    assert status == 2 and "not empty" in err and "precious.dat" in err
    assert [p.name for p in probe_dir.iterdir()] == ["precious.dat"]
    assert stored_runs(howfast) == []


def test_fio_missing_says_how_to_install_it(cli, howfast, probe_dir: Path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    status, _, err = cli("probe", str(probe_dir), "--profile", "wal-fsync")
    assert status == 1
    assert "fio not found" in err and "apt-get install -y fio" in err
    assert stored_runs(howfast) == []
    assert_left_clean(probe_dir)


def test_in_a_plan_missing_tools_skip_their_step_and_the_run_goes_on(
    probe_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("PATH", "/nonexistent")
    params: dict[str, JSONValue] = {"profile": "wal-fsync", "size_bytes": 2**24, "runtime_s": 1}
    fio = run_step(FioWorkload(), probe_dir, params, tmp_path)
    fsync = run_step(PgTestFsyncWorkload(), probe_dir, {"seconds": 1}, tmp_path)
    assert (fio.status, fio.error) == (
        "skipped",
        "fio is not installed (install it with: sudo apt-get install -y fio)",
    )
    assert fsync.status == "skipped" and "pg_test_fsync not found in /nonexistent" in fsync.error
    assert "apt-get install" in fsync.error
    assert_left_clean(probe_dir)


def test_without_libaio_fio_runs_again_with_psync(probe_dir, tmp_path, monkeypatch):
    # A fio that fails, as a build without libaio does, on job files asking for libaio.
    script = (
        'if grep -q "^ioengine=libaio" "$job"; then\n'
        '  echo "fio: engine libaio not loadable" >&2; echo "fio: failed to load engine" >&2\n'
        "  exit 1\n"
        "fi\n"
        f'exec {shutil.which("fio")} "$@"\n'
    )
    fake_fio(tmp_path / "bin", script, monkeypatch)
    params: dict[str, JSONValue] = {
        "profile": "rand-read-4k-qd64",
        "size_bytes": 2**24,
        "runtime_s": 1,
    }
    outcome = run_step(FioWorkload(), probe_dir, params, tmp_path)
    assert outcome.status == "completed", outcome.error
    assert outcome.metrics["read_iops"] > 0
    assert outcome.resolved_params["ioengine"] == "psync"
    assert any("libaio is not available" in w for w in outcome.warnings)
    assert_left_clean(probe_dir)


def test_fio_failing_fails_the_step_with_its_message_and_removes_the_file(
    probe_dir, tmp_path, monkeypatch
):
    script = (
        'file=$(sed -n "s/^filename=//p" "$job")\n'
        'head -c 65536 /dev/zero > "$file"\n'  # it got as far as writing the test file
        'echo "fio: io_u error on file $file: Input/output error" >&2\n'
        "exit 1\n"
    )
    fake_fio(tmp_path / "bin", script, monkeypatch)
    written: list[bool] = []
    real_stop = PathTarget.stop

    def stop(self: PathTarget) -> None:  # see what is left before the target cleans up
        written.append(any(self.probe_dir.iterdir()))
        real_stop(self)

    monkeypatch.setattr(PathTarget, "stop", stop)
    params: dict[str, JSONValue] = {"profile": "wal-fsync", "size_bytes": 2**24, "runtime_s": 1}
    outcome = run_step(FioWorkload(), probe_dir, params, tmp_path)
    assert outcome.status == "failed"
    assert outcome.error is not None
    assert outcome.error.startswith("fio exited with status 1:")
    assert "Input/output error" in outcome.error
    assert written == [False]  # the workload itself removed the file
    assert_left_clean(probe_dir)


def test_ctrl_c_during_a_probe_removes_the_file_and_aborts_the_run(
    howfast: Howfast, probe_dir: Path
):
    args = ["--profile", "randrw-4k-qd1", "--size", "32MiB", "--runtime", "60s"]
    proc = howfast.popen("probe", str(probe_dir), *args)
    deadline = time.monotonic() + 30
    while not list(probe_dir.glob("howfast-*/howfast-fio.dat")):
        assert time.monotonic() < deadline and proc.poll() is None, "fio never started"
        time.sleep(0.1)
    time.sleep(1)  # into the measured job
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert [(status, steps) for _, status, steps in stored_runs(howfast)] == [("aborted", 0)]
    assert_left_clean(probe_dir)
    assert open_files_under(probe_dir) == []


# --- dry run ------------------------------------------------------------------------------------


def test_dry_run_prints_job_files_and_the_pg_test_fsync_command(cli, howfast, probe_dir: Path):
    args = ["--dry-run", "--size", "64MiB", "--runtime", "3s"]
    status, text, err = cli("probe", str(probe_dir), *args)
    assert status == 0, err
    for name in PROFILES:
        assert f"\n[{name}]\n" in text
    assert text.count("\n[prefill]\n") == len(PROFILES)
    assert f"filename={probe_dir}/howfast-" in text and "size=67108864" in text
    assert "runtime=3" in text and "gtod_reduce" not in text.replace("Never gtod_reduce", "")
    assert "pg_test_fsync -f " in text and " -s 2" in text
    assert_left_clean(probe_dir)
    assert stored_runs(howfast) == []
    _, out, _ = cli("probe", str(probe_dir), "--dry-run", "--profile", "wal-fsync", "--json")
    (entry,) = json.loads(out)["steps"]
    assert entry["profile"] == "wal-fsync" and "fdatasync=1" in entry["jobfile"]


# --- import fio ---------------------------------------------------------------------------------


def test_import_fio_from_a_file_and_from_stdin(howfast: Howfast, cli):
    path = DATA / "fio-3.33_wal-fsync.json"
    status, stdout, err = cli("import", "fio", str(path), "--label", "ceph rbd", "--json")
    assert status == 0, err
    doc = json.loads(stdout)
    assert doc["plan"] == "import" and doc["label"] == "ceph rbd"
    assert doc["targets"][0]["kind"] == "import" and doc["targets"][0]["name"] == "ceph rbd"
    (step,) = doc["steps"]  # the prefill job is not a measurement
    assert step["workload"] == "fio" and step["params"]["profile"] == "wal-fsync"
    assert step["params"]["fdatasync"] == 1 and step["params"]["size_bytes"] == 32 * 2**20
    assert step["metrics"]["sync_lat_avg_ms"] == pytest.approx(0.417773182235)
    assert step["metrics"]["commit_ceiling_tps"] > 0

    text = (DATA / "fio-2.15_constructed.json").read_text()
    status, stdout, err = cli("import", "fio", "-", stdin=text)
    assert status == 0, err
    assert "stored as run" in err and "randrw-qd1" in stdout
    assert [steps for _, _, steps in stored_runs(howfast)] == [1, 2]

    status, _, err = cli("import", "fio", "-", stdin="fio: engine libaio not loadable\n")
    assert status == 2 and "no fio JSON output" in err
    status, _, err = cli("import", "fio", "-", stdin='{"fio version": "fio-3.33", "jobs": []}')
    assert status == 2 and "no measured job" in err
    assert len(stored_runs(howfast)) == 2


# --- probe steps in a plan ----------------------------------------------------------------------

PROBE_PLAN = """
[[steps]]
workload = "fio"
profiles = ["wal-fsync"]
size = "16MiB"
runtime = "1s"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "2s"
"""


@pytest.mark.skipif(pg_bindir() is None, reason="no PostgreSQL server binaries")
def test_a_plan_probes_next_to_the_cluster_and_shows_the_ceiling_beside_pgbench(
    howfast: Howfast, probe_dir: Path
):
    plan = howfast.plan(PROBE_PLAN)
    probe_dir.chmod(0o755)
    out = howfast("run", str(plan), "--target", str(probe_dir))
    assert out.returncode == 0, out.stderr
    assert "commit rate of one connection" in out.stdout
    assert "pgbench tpcb-like, 1 client:" in out.stdout and "of the ceiling" in out.stdout
    ((run_id, _, _),) = stored_runs(howfast)
    with open_store(str(howfast.store)) as db:
        run = read_run(db, run_id)
    assert run is not None
    fio = run.steps[0]
    assert fio.workload == "fio" and fio.status == "completed", fio.error
    assert float(fio.metrics["commit_ceiling_tps"]) > 0
    assert_left_clean(probe_dir)


# --- every profile, for real (started in the background, checked last) -----------------------


@dataclass
class BackgroundProbe:
    howfast: Howfast
    directory: Path
    proc: subprocess.Popen[str]
    started: float

    def result(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=180)
        return self.proc.returncode, out, err


EVERY_PROFILE_TEST = "test_every_profile_and_pg_test_fsync_make_one_step_each"


@pytest.fixture(scope="module")
def every_profile_probe(tmp_path_factory) -> Iterator[BackgroundProbe]:
    work = tmp_path_factory.mktemp("every-profile")
    howfast = Howfast(store=work / "results.db", workdir=work)
    base = shared_tmpdir("howfast-probe-all-")
    directory = base / "bench"
    directory.mkdir()
    proc = howfast.popen("probe", str(directory), *TINY, "--fsync-seconds", "1", "--json")
    try:
        yield BackgroundProbe(howfast, directory, proc, time.monotonic())
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def _start_the_long_probe_first(request) -> None:
    if any(item.name == EVERY_PROFILE_TEST for item in request.session.items):
        request.getfixturevalue("every_profile_probe")


def test_every_profile_and_pg_test_fsync_make_one_step_each(every_profile_probe):
    status, stdout, stderr = every_profile_probe.result()
    elapsed = time.monotonic() - every_profile_probe.started
    howfast, probe_dir = every_profile_probe.howfast, every_profile_probe.directory
    assert status == 0, stderr
    doc = json.loads(stdout)  # exactly one JSON document
    assert doc["plan"] == "probe" and doc["status"] == "completed"
    assert f"run {doc['id']}: 7 steps" in stderr and f"run {doc['id']} completed" in stderr
    (target,) = doc["targets"]
    assert target["kind"] == "path" and target["location"] == str(probe_dir)
    data = target["device"]["data"]
    assert data["fstype"] and data["mount_point"] and "device" in data
    steps = doc["steps"]
    assert [s["workload"] for s in steps] == ["fio"] * len(PROFILES) + ["pg_test_fsync"]
    assert [s["params"].get("profile") for s in steps[:-1]] == PROFILES
    for s in steps:
        assert s["status"] == "completed", s["error"]
    by_profile = {s["params"]["profile"]: s for s in steps[:-1]}
    for name, s in by_profile.items():
        assert s["params"]["size_bytes"] == 16 * 2**20 and s["params"]["runtime_s"] == 1
        m = s["metrics"]
        if "read" in name or "rw" in name:
            assert m["read_iops"] > 0 and m["read_lat_avg_ms"] > 0 and "read_lat_p99_ms" in m
        if "write" in name or "rw" in name or name == "wal-fsync":
            assert m["write_iops"] > 0 and m["write_lat_avg_ms"] > 0
    for name in ("rand-read-4k-qd64", "randrw-4k-qd1"):
        assert by_profile[name]["params"]["direct"] is True  # /var/tmp takes O_DIRECT
        assert by_profile[name]["warnings"] == []
    wal = by_profile["wal-fsync"]
    assert wal["params"]["ioengine"] == "psync" and wal["params"]["direct"] is False
    assert wal["metrics"]["sync_lat_avg_ms"] > 0 and "sync_lat_p99_ms" in wal["metrics"]
    ceiling = wal["metrics"]["commit_ceiling_tps"]
    flush = wal["metrics"]["write_lat_avg_ms"] + wal["metrics"]["sync_lat_avg_ms"]
    assert ceiling == pytest.approx(1000 / flush)
    fsync = steps[-1]
    assert fsync["metrics"]["fdatasync_ops_s"] > 0 and fsync["params"]["seconds"] == 1
    assert_left_clean(probe_dir)
    # Not a speed goal (benchmarks/ hold those): a probe that ignored its 1 s runtimes (fio's
    # default is to run until the file is done, pg_test_fsync's 5 s per test) would take far
    # longer than seven 1 s steps, even on a loaded machine.
    assert elapsed < 240

    # Series and histograms are stored; the table shows every profile and the ceiling.
    with open_store(str(howfast.store)) as db:
        run = db.get_run(int(doc["id"]), with_series=True)
    assert run is not None
    randrw = next(s for s in run.steps if s.params.get("profile") == "randrw-4k-qd1")
    assert set(randrw.histograms) >= {"read_lat_us", "write_lat_us"}
    assert sum(randrw.histograms["read_lat_us"].values()) > 0
    assert randrw.series.get("read_lat_ms") or randrw.series.get("read_iops")
    shown = stored_run_text(howfast, int(doc["id"]))
    assert all(name in shown for name in PROFILES)
    assert "commit rate of one connection" in shown and "pg_test_fsync fdatasync" in shown
