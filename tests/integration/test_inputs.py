"""Inputs that used to be taken silently wrong, late, or with a traceback (issue 26): each is
refused before anything runs (exit 2), or handled, by the real howfast command."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import PgServer, shared_tmpdir
from tests.integration.conftest import TINY_PLAN, Howfast, postgres_pids_under

pytestmark = pytest.mark.integration

INIT_ONLY = """
[[steps]]
workload = "pgbench-init"
scale = 1
"""

# The commands refused beside a live run or probe are checked while it holds the directory:
# it is stopped by the test (SIGINT), never by its end, so it lasts far longer than the checks
# can take on a loaded machine (each refused howfast starts its own interpreter: seconds then).
HOLD_S = 900
# `rate`: a step that only holds the server for the test runs 50 transactions/s, not flat out:
# what the test checks does not depend on its throughput, and the machine's CPU is shared.
LONG_STEP = f"""
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = "{HOLD_S}s"
rate = 50
"""


def stored_runs(howfast: Howfast) -> list[dict[str, object]]:
    out = howfast("results", "list", "--json")
    assert out.returncode == 0, out.stderr
    runs: list[dict[str, object]] = json.loads(out.stdout)
    return runs


def refused(out: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2 with one clear line, no traceback, naming what is wrong."""
    assert out.returncode == 2, (out.returncode, out.stderr[-3000:])
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.count("howfast: error:") == 1, out.stderr
    for needle in needles:
        assert needle in out.stderr, (needle, out.stderr)


def wait_for(proc: subprocess.Popen[str], text: str, timeout: float = 120) -> str:
    """Read stderr until `text` appears; return what was read."""
    seen = ""
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not seen in stderr:\n{seen}")


def stop(proc: subprocess.Popen[str]) -> None:
    """Interrupt a howfast started by the test and wait for its cleanup."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)


@pytest.fixture
def live_run(howfast: Howfast, target_dir: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A run in its long pgbench step on target_dir, and its cluster directory."""
    proc = howfast.popen("run", str(howfast.plan(LONG_STEP)), "--target", str(target_dir))
    try:
        wait_for(proc, "[2/2]")
        (cluster,) = target_dir.glob("howfast-*")
        yield proc, cluster
    finally:
        stop(proc)


# -- item 1: empty, blank and control-character paths ------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["run", "PLAN", "--target", ""],
        ["run", "PLAN", "--target", "   "],
        ["run", "PLAN", "--target", "DIR", "--wal-dir", ""],
        ["run", "PLAN", "--target", "DIR", "--store", ""],
        ["run", "PLAN", "--target", "DIR", "--pg-bin", " "],
        ["probe", ""],
        ["probe", "DIR", "--pg-bin", ""],
        ["doctor", "--pg-bin", ""],
        ["results", "list", "--store", ""],
        ["report", "1", "-o", ""],
        ["export", "prometheus", "1", "-o", "  "],
    ],
    ids=lambda args: " ".join(repr(a) for a in args),
)
def test_an_empty_or_blank_path_is_refused_not_taken_as_the_current_directory(
    howfast: Howfast, target_dir: Path, args: list[str]
):
    """`--target "$UNSET"` used to benchmark the current directory (howfast's own cwd here,
    which is empty, so it would have been claimed and used)."""
    plan = str(howfast.plan(TINY_PLAN))
    argv = [plan if a == "PLAN" else str(target_dir) if a == "DIR" else a for a in args]
    before = sorted(p.name for p in howfast.workdir.iterdir())
    out = howfast(*argv)
    refused(out, "Invalid value for")
    assert "empty" in out.stderr or "only blanks" in out.stderr, out.stderr
    assert sorted(p.name for p in howfast.workdir.iterdir()) == before
    assert list(target_dir.iterdir()) == []


@pytest.mark.parametrize("name", ["a\nb", "tab\there", "esc\x1b[2Jx", "cr\rx"])
def test_a_path_with_a_control_character_is_refused(howfast: Howfast, target_dir: Path, name: str):
    """A newline used to reach initdb and postgresql.conf."""
    bad = target_dir / name
    bad.mkdir()
    bad.chmod(0o755)
    for argv in (
        ["run", str(howfast.plan(TINY_PLAN)), "--target", str(bad)],
        ["probe", str(bad)],
        ["run", str(howfast.plan(TINY_PLAN)), "--target", str(target_dir), "--wal-dir", str(bad)],
    ):
        out = howfast(*argv)
        refused(out, "control character")
        assert "\x1b" not in out.stderr and "\r" not in out.stderr  # shown as escapes
    assert list(bad.iterdir()) == []
    assert stored_runs(howfast) == []


# -- item 2: inside a directory howfast created ------------------------------------------


def test_a_target_inside_a_live_runs_cluster_directory_is_refused(
    howfast: Howfast, live_run: tuple[subprocess.Popen[str], Path], tmp_path: Path
):
    """The live run's cleanup would delete it under the second run."""
    proc, cluster = live_run
    inner = cluster / "mine"
    inner.mkdir()
    link = tmp_path / "link"
    link.symlink_to(inner)
    elsewhere = shared_tmpdir("howfast-inputs-")
    try:
        plan = str(howfast.plan(TINY_PLAN))
        for out in howfast.together(
            ["run", plan, "--target", str(inner)],
            ["run", plan, "--target", str(link)],  # through a symlink
            ["run", plan, "--target", str(cluster)],
            ["run", plan, "--target", str(elsewhere), "--wal-dir", str(inner)],
            ["probe", str(inner)],
        ):
            refused(out, str(cluster), "a directory howfast created", f"(PID {proc.pid})")
        assert list(inner.iterdir()) == [] and list(elsewhere.iterdir()) == []
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    assert proc.poll() is None, "the live run goes on"


def test_a_target_inside_a_kept_cluster_is_refused(howfast: Howfast, target_dir: Path):
    out = howfast("run", str(howfast.plan(INIT_ONLY)), "--target", str(target_dir), "--keep")
    assert out.returncode == 0, out.stderr
    (cluster,) = target_dir.glob("howfast-*")
    inner = cluster / "mine"
    inner.mkdir()
    again = howfast("run", str(howfast.plan(INIT_ONLY)), "--target", str(inner))
    refused(again, str(cluster), "kept by an earlier run")
    assert list(inner.iterdir()) == []
    assert len(stored_runs(howfast)) == 1


# -- item 3: probe takes the directory lock ----------------------------------------------


def test_a_probe_beside_a_live_run_is_refused_naming_it(
    howfast: Howfast, live_run: tuple[subprocess.Popen[str], Path], target_dir: Path
):
    proc, _ = live_run
    out = howfast("probe", str(target_dir), "--profile", "randrw-4k-qd1", "--size", "1MiB")
    refused(out, "is in use by run 1", f"(PID {proc.pid})")
    assert [r["plan"] for r in stored_runs(howfast)] == ["tiny"]  # no probe run stored
    assert proc.poll() is None, "the live run held the directory throughout"


def test_two_probes_on_one_directory(howfast: Howfast, target_dir: Path):
    first = howfast.popen(
        "probe", str(target_dir), "--profile", "randrw-4k-qd1", "--size", "8MiB",
        "--runtime", f"{HOLD_S}s",
    )  # fmt: skip
    try:
        wait_for(first, "[1/1]")  # its step runs: it holds the directory until stopped
        second = howfast("probe", str(target_dir), "--profile", "randrw-4k-qd1")
        refused(second, "probe directory", "is in use by run 1", f"(PID {first.pid})")
        # and a run beside the probe
        third = howfast("run", str(howfast.plan(TINY_PLAN)), "--target", str(target_dir))
        refused(third, "is in use by run 1", f"(PID {first.pid})")
        assert first.poll() is None, "the first probe held the directory throughout"
    finally:
        stop(first)
    assert first.returncode == 130
    assert [r["status"] for r in stored_runs(howfast)] == ["aborted"]
    assert list(target_dir.iterdir()) == []
    # free again once the probe has ended
    again = howfast(
        "probe", str(target_dir), "--profile", "randrw-4k-qd1", "--size", "1MiB",
        "--runtime", "1s",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr


# -- item 5: doctor --pg-bin ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "file", "empty directory"])
def test_doctor_with_a_pg_bin_that_is_not_one_fails(howfast: Howfast, tmp_path: Path, kind):
    where = {"missing": tmp_path / "nope", "file": tmp_path / "f", "empty directory": tmp_path}
    path = where[kind]
    if kind == "file":
        path.write_text("x")
    out = howfast("doctor", "--pg-bin", str(path), "--json")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] is False
    pinned = doc["checks"][0]
    assert pinned["name"] == f"--pg-bin {path}" and pinned["ok"] is False and pinned["required"]
    assert not any("used by default" in c["detail"] for c in doc["checks"]), doc["checks"]
    table = howfast("doctor", "--pg-bin", str(path))
    assert table.returncode == 1 and "MISSING" in table.stdout


def test_doctor_with_a_real_pg_bin_is_ok(howfast: Howfast):
    from tests.conftest import pg_bindir

    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL")
    out = howfast("doctor", "--pg-bin", str(bindir), "--json")
    assert out.returncode == 0, out.stdout
    first = json.loads(out.stdout)["checks"][0]
    assert first["ok"] and "via --pg-bin (used)" in first["detail"]


# -- item 7: run ids beyond SQLite's integers -----------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["results", "show", "ID"],
        ["results", "delete", "ID"],
        ["compare", "1", "ID"],
        ["report", "ID", "-o", "r.html"],
        ["export", "prometheus", "ID", "-o", "r.prom"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_run_id_beyond_the_integer_range(howfast: Howfast, argv: list[str]):
    huge = "99999999999999999999999"
    out = howfast(*[huge if a == "ID" else a for a in argv])
    refused(out, "is not a run id", "9223372036854775807")
    assert "OverflowError" not in out.stderr
    largest = howfast("results", "show", str(2**63 - 1))
    refused(largest, "no run 9223372036854775807")


# -- item 8: connect_timeout in the target --------------------------------------------------


@dataclass
class SilentServer:
    """A loopback port that accepts connections and never answers: libpq waits on it until
    its connect_timeout, then closes. `held` has, for each connection, how long the client
    kept it open: the time-out it used, measured on this side, whatever howfast's start-up
    took on a loaded machine."""

    port: int
    held: list[float] = field(default_factory=list)


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    server = SilentServer(int(listener.getsockname()[1]))
    accepted: list[socket.socket] = []
    done = threading.Event()

    def hold(conn: socket.socket) -> None:
        opened = time.monotonic()
        conn.settimeout(60)
        with contextlib.suppress(OSError):
            while conn.recv(4096):  # libpq's startup packet, then nothing: until it closes
                pass
            server.held.append(time.monotonic() - opened)

    def accept() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                conn = listener.accept()[0]
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)
            threading.Thread(target=hold, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        done.set()
        thread.join(timeout=5)
        for conn in accepted:
            conn.close()
        listener.close()


@pytest.mark.parametrize("form", ["uri", "key=value"])
def test_connect_timeout_in_the_target_is_honoured(
    howfast: Howfast, silent_server: SilentServer, form
):
    """It used to be a TypeError (connect_timeout given twice); the user's 2 s is used, not
    howfast's 10 s."""
    port = silent_server.port
    target = (
        f"postgresql://bench@127.0.0.1:{port}/postgres?connect_timeout=2"
        if form == "uri"
        else f"host=127.0.0.1 port={port} dbname=postgres connect_timeout=2"
    )
    out = howfast("run", str(howfast.plan(TINY_PLAN)), "--target", target, "--yes")
    assert "Traceback" not in out.stderr and "TypeError" not in out.stderr, out.stderr
    assert out.returncode == 1, out.stderr
    assert "cannot connect to 127.0.0.1" in out.stderr and "timeout" in out.stderr, out.stderr
    # Each connection was given up after the user's 2 s (libpq's timer), not howfast's 10 s.
    assert silent_server.held, "howfast never connected"
    assert all(1.5 <= held < 6 for held in silent_server.held), silent_server.held


def test_a_run_with_connect_timeout_on_a_real_server(howfast: Howfast, pg_server: PgServer):
    plan = howfast.plan(TINY_PLAN.replace('["select-only", "tpcb-like", "simple-update"]',
                                          '["select-only"]'))  # fmt: skip
    out = howfast("run", str(plan), "--target", pg_server.dsn + "?connect_timeout=5", "--yes")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "TypeError" not in out.stderr


# -- item 9: the same target twice, --wal-dir on the target ---------------------------------


def test_the_same_directory_twice_is_refused_before_anything_runs(
    howfast: Howfast, target_dir: Path, tmp_path: Path
):
    link = tmp_path / "same"
    link.symlink_to(target_dir)
    plan = str(howfast.plan(TINY_PLAN))
    for second in (f"{target_dir}/", str(link), f"{target_dir}/../{target_dir.name}"):
        out = howfast("run", plan, "--target", str(target_dir), "--target", second)
        refused(out, f"{second} is {target_dir} again")
    nested = target_dir / "inner"
    nested.mkdir()
    out = howfast("run", plan, "--target", str(target_dir), "--target", str(nested))
    refused(out, f"{nested} is inside target directory {target_dir}")
    assert [p.name for p in target_dir.iterdir()] == ["inner"]
    assert stored_runs(howfast) == []


def test_the_same_server_twice_is_refused(howfast: Howfast, pg_server: PgServer):
    out = howfast(
        "run", str(howfast.plan(TINY_PLAN)), "--target", pg_server.dsn, "--target",
        pg_server.dsn,
    )  # fmt: skip
    refused(out, "is given twice")
    assert pg_server.password not in out.stderr
    assert stored_runs(howfast) == []


@pytest.mark.parametrize("where", ["itself", "inside", "around"])
def test_wal_dir_on_the_target_is_refused(howfast: Howfast, target_dir: Path, where: str):
    """--wal-dir equal to the target used to fail with [Errno 17] once the run had begun."""
    inner = target_dir / "sub"
    inner.mkdir()
    target, wal = {
        "itself": (target_dir, target_dir),
        "inside": (target_dir, inner),
        "around": (inner, target_dir),
    }[where]
    out = howfast("run", str(howfast.plan(TINY_PLAN)), "--target", str(target), "--wal-dir",
                  str(wal))  # fmt: skip
    refused(out, "--wal-dir", "itself" if where == "itself" else where)
    assert [p.name for p in target_dir.iterdir()] == ["sub"] and not any(inner.iterdir())
    assert stored_runs(howfast) == []


# -- item 10: settings that cannot start, and start failures --------------------------------


def test_shared_buffers_beyond_memory_is_refused_before_anything_runs(
    howfast: Howfast, target_dir: Path
):
    """It used to start a server (taking minutes where memory is overcommitted) and report
    "did not become ready within 60 s" without the reason."""
    started = time.monotonic()
    out = howfast(
        "run", str(howfast.plan(TINY_PLAN)), "--target", str(target_dir),
        "--set", "shared_buffers=1TB",
    )  # fmt: skip
    refused(out, "--set shared_buffers=1TB", "does not fit in the memory", "RAM")
    assert time.monotonic() - started < 60
    assert list(target_dir.iterdir()) == [] and stored_runs(howfast) == []
    planned = howfast.plan(TINY_PLAN.replace('shared_buffers = "32MB"', 'shared_buffers = "4TB"'))
    out = howfast("run", str(planned), "--target", str(target_dir), "--memory", "1GiB")
    refused(out, "tiny.toml:4: settings.shared_buffers", "1.00 GiB (the --memory cap)")
    # A --set replaces the plan's value: only the value in force must fit (a dry run, to
    # check the settings as a run would without running).
    out = howfast("run", str(planned), "--target", str(target_dir), "--memory", "1GiB",
                  "--set", "shared_buffers=16MB", "--dry-run")  # fmt: skip
    assert out.returncode == 0, out.stderr


def test_a_server_that_cannot_start_says_why_at_once(howfast: Howfast, target_dir: Path):
    """ssl=on without a certificate: the postmaster exits at start; its log says why."""
    started = time.monotonic()
    out = howfast(
        "run", str(howfast.plan(INIT_ONLY)), "--target", str(target_dir), "--set", "ssl=on",
        "--json",
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert time.monotonic() - started < 60
    (step,) = json.loads(out.stdout)["steps"]
    assert "PostgreSQL exited during start-up" in step["error"]
    assert "the server log's last lines" in step["error"]
    assert 'could not load server certificate file "server.crt"' in step["error"]
    # the progress lines say it too (wrapped at the console's width)
    assert 'could not load server certificate file "server.crt"' in " ".join(out.stderr.split())
    assert list(target_dir.iterdir()) == [] and postgres_pids_under(target_dir) == []


def test_a_start_time_out_shows_the_server_log(target_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """A real server that does not answer where howfast looks (its socket is elsewhere):
    after the (shortened) time-out the message has the log's last lines, which say where
    it listens. `howfast run` refuses that setting, so the target is made here directly:
    what is tested is the time-out's message, with a real postmaster that stays up."""
    from howfast.errors import HowfastError
    from howfast.machine.pgbin import choose_install
    from howfast.targets import local

    elsewhere = shared_tmpdir("howfast-socket-")
    elsewhere.chmod(0o777)
    monkeypatch.setattr("howfast.targets.local.server.START_TIMEOUT_S", 3)
    target = local.LocalTarget(
        target_dir,
        choose_install(),
        settings={"unix_socket_directories": str(elsewhere), "fsync": "off"},
    )
    try:
        with pytest.raises(HowfastError) as caught:
            target.start()
    finally:
        target.stop()
        shutil.rmtree(elsewhere, ignore_errors=True)
    message = str(caught.value)
    assert "did not become ready within 3 s" in message
    assert "the server log's last lines" in message
    assert str(elsewhere) in message  # "listening on Unix socket .../.s.PGSQL.N"
    assert list(target_dir.iterdir()) == [] and postgres_pids_under(target_dir) == []


# -- minors -------------------------------------------------------------------------------


def test_a_failed_load_shows_the_whole_error(howfast: Howfast, target_dir: Path):
    """The table used to print `['pgbench exited with status 1:']` and hide the cause."""
    out = howfast(
        "run", str(howfast.plan(INIT_ONLY)), "--target", str(target_dir),
        "--set", "default_tablespace=nope",
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    shown = howfast("results", "show", "1")
    assert shown.returncode == 0, shown.stderr
    for text in (out.stdout, shown.stdout):
        assert "['" not in text, text
        assert "load (pgbench -i): failed: pgbench exited with status 1:" in text
        assert 'Tablespace "nope" does not exist' in text, text


PGBENCH_OUTPUT = """transaction type: <builtin: select only>
scaling factor: 1
query mode: simple
number of clients: 1
number of threads: 1
duration: 10 s
number of transactions actually processed: 100
latency average = 1.000 ms
tps = 100.000000 (without initial connection time)
"""


def test_labels_are_shown_safely_and_imports_without_unknowns(howfast: Howfast, tmp_path):
    """An escape sequence in a label was printed raw; "[/x]" raised rich's MarkupError; an
    imported run showed "host None, kernel None, None CPUs"."""
    (tmp_path / "out.txt").write_text(PGBENCH_OUTPUT)
    label = "e\x1b[2J[/x]\x07"  # short: table cells wrap long ones
    first = howfast("import", "pgbench", "out.txt", "--label", label)
    assert first.returncode == 0, first.stderr
    assert howfast("import", "pgbench", "out.txt", "--label", "plain").returncode == 0
    report = tmp_path / "r.md"
    outputs = [
        first.stdout + first.stderr,
        howfast("results", "list").stdout,
        howfast("results", "show", "1").stdout,
        howfast("compare", "1", "2").stdout,
    ]
    assert howfast("report", "1", "2", "-o", str(report)).returncode == 0
    outputs.append(report.read_text())
    for text in outputs:
        assert "\x1b" not in text and "\x07" not in text, text
        assert "Traceback" not in text
        assert "e\\x1b[2J[/x]\\x07" in text, text
    assert "None" not in outputs[2], outputs[2]
    doc = json.loads(howfast("results", "show", "1", "--json").stdout)
    assert doc["label"] == label  # stored and exported as given


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: mounts a read-only filesystem")
def test_a_store_on_a_read_only_mount_can_be_read(howfast: Howfast, tmp_path: Path):
    (tmp_path / "out.txt").write_text(PGBENCH_OUTPUT)
    assert howfast("import", "pgbench", "out.txt", "--label", "ro").returncode == 0
    mount = shared_tmpdir("howfast-ro-store-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "howfast-ro-store", str(mount)],
                   check=True)  # fmt: skip
    try:
        shutil.copy(howfast.store, mount / "results.db")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        store = str(mount / "results.db")
        listed = howfast("results", "list", "--json", "--store", store)
        assert listed.returncode == 0, listed.stderr
        assert [r["label"] for r in json.loads(listed.stdout)] == ["ro"]
        for argv in (
            ["results", "show", "1"],
            ["compare", "1", "1"],
            ["report", "1", "-o", str(tmp_path / "r.html")],
            ["export", "prometheus", "1", "-o", str(tmp_path / "r.prom")],
        ):
            out = howfast(*argv, "--store", store)
            assert "cannot be written" not in out.stderr and "Traceback" not in out.stderr
            assert out.returncode in (0, 2), out.stderr  # compare 1 1: one target, refused
        write = howfast("import", "pgbench", "out.txt", "--store", store)
        assert write.returncode == 1 and "cannot be written" in write.stderr, write.stderr
        assert sorted(p.name for p in mount.iterdir()) == ["results.db"]
    finally:
        subprocess.run(["umount", str(mount)], check=False)
        shutil.rmtree(mount, ignore_errors=True)


def test_an_absurd_memory_cap_is_refused_with_its_bound(howfast: Howfast, target_dir: Path):
    out = howfast("run", str(howfast.plan(TINY_PLAN)), "--target", str(target_dir), "--memory",
                  "1KiB", "--dry-run")  # fmt: skip
    refused(out, "--memory 1 KiB is too small", "at least 64 MiB")
    assert "0 MiB" not in out.stderr


def test_a_key_set_twice_in_a_plan_is_named(howfast: Howfast, target_dir: Path):
    twice = TINY_PLAN.replace('shared_buffers = "32MB"', 'shared_buffers = "32MB"\nwork_mem = "4MB"'
                              '\nshared_buffers = "64MB"')  # fmt: skip
    out = howfast("run", str(howfast.plan(twice, "twice.toml")), "--target", str(target_dir))
    refused(out, "twice.toml:6:", "settings.shared_buffers is set twice (first on line 4)")
    step_twice = TINY_PLAN.replace("scale = 1", "scale = 1\nscale = 2")
    out = howfast("run", str(howfast.plan(step_twice, "steps.toml")), "--target", str(target_dir))
    refused(out, "steps.toml:8:", "steps[0].scale is set twice (first on line 7)")
