"""Emulated volumes on real layers: nbdkit with howfast's delay plugin, nbdfuse, a loop device,
ext4 and the cgroup I/O controller, built and taken down by howfast around a real cluster."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from howfast.targets.emulated.volume import available
from tests.integration.conftest import Howfast

pytestmark = [
    pytest.mark.integration,
    pytest.mark.emulated,  # scripts/test.sh runs these alone, after the others
    pytest.mark.skipif(
        available().name is None, reason=f"no emulated volumes here: {available().reason}"
    ),
]

ONE_CLIENT = """
description = "one client, tpcb-like"
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "{duration}"
"""


def loop_devices() -> set[str]:
    out = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return set(out.stdout.splitlines())


# Other runs may build volumes on this machine at the same time (other test sessions): each
# check looks only at what belongs to the volumes of this test's target directory, which all
# carry the directory's path or their `howfast-vol-<token>` name.
def mine(text: str, target_dir: Path, tokens: set[str]) -> bool:
    return str(target_dir) in text or any(f"howfast-vol-{t}" in text for t in tokens)


def volume_tokens(target_dir: Path) -> set[str]:
    """The tokens of the volumes being built in the target directory now."""
    return {p.name.removeprefix("howfast-vol-") for p in target_dir.glob("howfast-vol-*")}


def mounts_of(target_dir: Path, tokens: set[str]) -> list[str]:
    lines = Path("/proc/self/mounts").read_text().splitlines()
    return [line for line in lines if mine(line, target_dir, tokens)]


def layer_processes(target_dir: Path, tokens: set[str]) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if cmdline.startswith(("nbdkit", "nbdfuse")) and mine(cmdline, target_dir, tokens):
            found.append(cmdline)
    return found


def assert_nothing_left(target_dir: Path, tokens: set[str]) -> None:
    assert list(target_dir.iterdir()) == []
    assert mounts_of(target_dir, tokens) == []
    assert [line for line in loop_devices() if mine(line, target_dir, tokens)] == []
    assert layer_processes(target_dir, tokens) == []
    assert [
        p for p in Path("/dev/shm").glob("howfast-vol-*") if mine(str(p), target_dir, tokens)
    ] == []


def test_added_latency_slows_every_commit_of_one_client_and_leaves_nothing(
    howfast: Howfast, target_dir: Path
):
    plan = howfast.plan(ONE_CLIENT.format(duration="5s"))
    out = howfast("run", str(plan), "--target", str(target_dir), "--storage-latency",
                  "0,0.5ms,2ms", "--storage-size", "512MiB", "--json", timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    fast, half, slow = doc["targets"]
    assert [t["name"].rsplit(" ", 1)[1] for t in doc["targets"]] == ["+0ms", "+0.5ms", "+2ms"]
    emulation = {t["name"]: t["device"]["emulation"] for t in doc["targets"]}
    print(json.dumps(emulation, indent=1))
    for target, asked in ((fast, 0.0), (half, 0.5), (slow, 2.0)):
        record = emulation[target["name"]]
        assert record["backend"] == "nbdkit-python"
        assert record["asked_latency_ms"] == record["asked_flush_latency_ms"] == asked
    # What the QD1 checks measured: writes and flushes both delayed, a fraction of a
    # millisecond too (generous bounds: the layers and a loaded machine add their own; the
    # added latency is taken from each side's 10th-percentile write, which the load moves
    # far less than the means, targets/emulated/storage.py FLOOR_PERCENTILE).
    assert 1.5 <= emulation[slow["name"]]["measured_added_latency_ms"] <= 4.0, emulation
    assert 0.25 <= emulation[half["name"]]["measured_added_latency_ms"] <= 1.5, emulation
    assert emulation[fast["name"]]["measured_added_latency_ms"] < 1.0, emulation
    # A flush through the loop device reaches the delay plugin and waits at least its delay
    # (the image's fdatasync comes on top: 0.4-2.4 ms at +0 ms on this busy machine, so this
    # alone cannot tell a delayed flush from a slow disk; the commits below can).
    flush = {name: record["measured_flush_latency_ms"] for name, record in emulation.items()}
    assert flush[slow["name"]] >= 1.9 and flush[half["name"]] >= 0.45, flush
    runs = {s["target"]: s["metrics"] for s in doc["steps"] if s["workload"] == "pgbench"}
    tps = {name: m["tps"] for name, m in runs.items()}
    print({name: (m["tps"], m["latency_avg_ms"], m["latency_p50_ms"]) for name, m in runs.items()})
    # Every commit is a WAL write then a flush, both delayed: each transaction waits two added
    # delays, so even the fastest one of a variant takes them (one delay, as when the flush
    # was not delayed, would not). Said of each variant's fastest transaction, from the exact
    # latency histogram: other work on the machine only adds to a transaction, and some of
    # each run's hundreds meet none. The medians do not do: in CI the +0 ms run's median
    # (11.8 ms) exceeded the +0.5 ms run's (8.8 ms), the two runs a minute apart meeting
    # different loads. Quiet: fastest 1.00, 2.50 and 6.36 ms (medians 1.57, 3.44, 7.35 ms);
    # beside eight busy loops: fastest 1.21, 2.52 and 6.36 ms (medians 3.95, 3.99, 7.95 ms).
    fastest_ms = howfast.fastest_transaction_ms(doc["id"])
    print("fastest transaction, ms:", fastest_ms)
    assert fastest_ms[half["name"]] >= 2 * 0.5 and fastest_ms[slow["name"]] >= 2 * 2.0, fastest_ms
    assert fastest_ms[fast["name"]] < fastest_ms[half["name"]] < fastest_ms[slow["name"]]
    # Two delays of 2 ms and not one: 4 ms more than the +0 ms variant's fastest, less what
    # the layers' own time adds to both (one delay gave 2.1 ms more of median): asking for
    # 3 ms tells the two apart.
    assert fastest_ms[slow["name"]] - fastest_ms[fast["name"]] >= 3.0, fastest_ms
    # The "TPS falls by 3x" is that added time over the +0 ms transaction, which the
    # load of other work on this shared machine lengthens: 3.8-3.9x at a load of 5, 2.0-3.0x
    # in runs whose +0 ms variant was slowed to 255-450 TPS. A ratio of speeds is no test's
    # to assert here: benchmarks/emulated-volume checks the 3x goal, interleaved.
    # Where the +0 ms variant ran unhindered (781 TPS on a quiet machine), the 3x is
    # judged here too; a starved one says why it is not. 3x needs the added time to be twice
    # the +0 ms transaction: at 500 TPS (2 ms) that is all of the 4 ms added, with no room for
    # the two runs, a minute apart, meeting different loads (3.8 ms was measured). From 700
    # TPS (1.43 ms) on, 2.9 ms of the 4 ms suffice.
    if tps[fast["name"]] >= 700:
        assert tps[fast["name"]] >= 3 * tps[slow["name"]], tps
    else:
        print(f"3x not judged: +0 ms reached only {tps[fast['name']]:.0f} TPS (a busy machine)")
    volumes = [Path(t["device"]["emulation"]["volume"]).parent.name for t in doc["targets"]]
    assert_nothing_left(target_dir, {v.removeprefix("howfast-vol-") for v in volumes})


def test_an_iops_cap_holds_on_the_volume(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(
        '[[steps]]\nworkload = "fio"\nprofiles = ["rand-read-4k-qd64"]\n'
        'size = "16MiB"\nruntime = "3s"\n'
    )
    out = howfast("run", str(plan), "--target", str(target_dir), "--storage-iops", "200,0",
                  "--storage-size", "256MiB", "--json", timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    capped, free = (s["metrics"]["read_iops"] for s in json.loads(out.stdout)["steps"])
    assert capped <= 200 * 1.1 and free > 2 * capped, (capped, free)
    assert list(target_dir.iterdir()) == []


def test_interrupt_during_a_step_takes_every_layer_down(howfast: Howfast, target_dir: Path):
    # rate: the step only holds the run while the test interrupts it; not flat out
    plan = howfast.plan(ONE_CLIENT.format(duration="60s") + "rate = 50\n")
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--storage-latency",
                         "1ms", "--storage-size", "256MiB")  # fmt: skip
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + 180
    while "[2/2]" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    assert "[2/2]" in seen, seen
    time.sleep(2)
    tokens = volume_tokens(target_dir)
    assert tokens and layer_processes(target_dir, tokens), "nbdkit and nbdfuse run"
    assert mounts_of(target_dir, tokens), "the volume and its FUSE file are mounted"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert_nothing_left(target_dir, tokens)


def test_without_the_tools_it_is_refused_with_what_to_install(
    howfast: Howfast, target_dir: Path, tmp_path: Path
):
    # A PATH with PostgreSQL's and Python's programs but without nbdkit and nbdfuse.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("losetup", "mkfs.ext4", "fio", "mount", "umount"):
        found = subprocess.run(["which", name], capture_output=True, text=True).stdout.strip()
        if found:
            os.symlink(found, bin_dir / name)
    env = {**howfast.env(), "PATH": str(bin_dir)}
    out = subprocess.run(howfast.argv("run", "quick", "--target", str(target_dir),
                                      "--storage-latency", "2ms"),
                         env=env, capture_output=True, text=True, cwd=howfast.workdir)  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "cannot emulate a slower volume: missing nbdkit, nbdfuse" in out.stderr
    assert "apt-get install -y nbdkit nbdkit-plugin-python libnbd-bin" in out.stderr
    assert list(target_dir.iterdir()) == []
    assert (
        not howfast.store.exists() or json.loads(howfast("results", "list", "--json").stdout) == []
    )


def test_latency_plan_offers_the_fast_volumes_rate_to_both(howfast: Howfast, target_dir: Path):
    """The built-in plan, shrunk: the slow volume is offered 70% of the fast one's maximum,
    which the fast volume holds and the slow one cannot.

    One client and +30 ms (the plan's 16 and +2 ms; --storage-latency replaces both of the
    plan's [storage] lists, so its 2000 IOPS cap is given again): the slow volume's ceiling
    must lie below the offer however busy the machine is. A commit waits for a WAL write and a
    flush, 60 ms on the slow volume, so one client commits at most 16.7 times a second. The
    fast volume's maximum is set by the machine's CPU when it is busy: 167 TPS at 4 clients
    in a fresh loaded run (the slow one, +2 ms, reached 144 and held the offer of 117 too),
    37 TPS at 1 client in CI (the slow one, +10 ms and at most 50, held the offer of 26)."""
    out = howfast("run", "latency", "--target", str(target_dir), "--scale", "2",
                  "--clients", "1", "--storage-latency", "0,30ms", "--storage-iops", "2000",
                  "--duration", "4s", "--storage-size", "1GiB", "--json",
                  timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    fast, slow = (t["name"] for t in doc["targets"])
    assert fast.endswith("+0ms 2000 IOPS") and slow.endswith("+30ms 2000 IOPS")
    assert all(t["device"]["memory_limit_bytes"] == 192 * 2**20 for t in doc["targets"])
    steps = {(s["target"], s["params"].get("curve_role") or "rate"): s for s in doc["steps"]}
    fast_max = steps[(fast, "max")]["metrics"]["tps"]
    for target in (fast, slow):
        assert steps[(target, "rate")]["params"]["rate"] == pytest.approx(0.7 * fast_max, abs=0.1)
    offered = 0.7 * fast_max
    # The slow volume cannot achieve the rate: it falls short and its verdict says so; its
    # ceiling is its disk's (one client, a WAL write and a flush of 30 ms each a commit).
    # The fast one is held to the offer by pgbench's schedule (never above it, but for the
    # scatter of 4 s of a Poisson schedule, 4% at 126 TPS) and comes closer to it than the
    # slow one. How close is the machine's: on a quiet one it holds it (>= 0.9 of the offer),
    # but other work can slow it between its maximum and its rate step (0.7 seen at a load
    # of 8; in CI 60 of an offer of 126, after a maximum of 180).
    fast_tps, slow_tps = (steps[(t, "rate")]["metrics"]["tps"] for t in (fast, slow))
    print(
        f"max fast {fast_max:.0f}, slow {steps[(slow, 'max')]['metrics']['tps']:.0f}; "
        f"offered {offered:.0f}: fast {fast_tps:.0f}, slow {slow_tps:.0f}"
    )
    assert fast_tps > 1.1 * slow_tps and fast_tps < 1.2 * offered, (fast_tps, slow_tps, offered)
    assert steps[(slow, "rate")]["metrics"]["rate_met"] is False
    assert slow_tps < 0.9 * offered and slow_tps < 1.05 * 1000 / 60, (slow_tps, offered)
    assert steps[(slow, "max")]["metrics"]["tps"] < offered


def test_more_latency_than_the_bound_is_refused_before_anything(howfast: Howfast, target_dir: Path):
    """Issue 26, item 11: `--storage-latency 1h` was accepted and hung in losetup, holding
    every loop device of the machine until its nbdkit was killed. The refusal comes before
    anything is built, --dry-run or not (--dry-run first: a regression then prints a plan
    instead of hanging the machine)."""
    for latency, dry_run in (("1h", ["--dry-run"]), ("0,20s", ["--dry-run"]), ("101ms", [])):
        out = howfast("run", "quick", "--target", str(target_dir), "--storage-latency", latency,
                      *dry_run)  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert "is more latency than an emulated volume adds: at most 100ms per I/O" in out.stderr
    plan = howfast.plan('[storage]\nlatency = ["0", "1h"]\n' + ONE_CLIENT.format(duration="1s"))
    out = howfast("run", str(plan), "--target", str(target_dir), "--dry-run")
    assert out.returncode == 2 and "storage.latency[1]" in out.stderr, out.stderr
    assert list(target_dir.iterdir()) == []
    assert (
        not howfast.store.exists() or json.loads(howfast("results", "list", "--json").stdout) == []
    )


def set_up_process(target_dir: Path, phase: str) -> bool:
    """Whether the set-up of a volume in `target_dir` is at `phase` now: the tool that does it
    runs (mount of the volume, fio's QD1 check on it, initdb of the cluster on it)."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if str(target_dir) not in " ".join(argv):
            continue
        name = Path(argv[0]).name
        if (name, phase) in (("mount", "mount"), ("initdb", "initdb")) or (
            name == "fio" and phase == "check" and "--name=qd1-check" in argv
        ):
            return True
    return False


@pytest.mark.parametrize(
    ("phase", "sig"),
    [("mount", signal.SIGINT), ("check", signal.SIGINT), ("initdb", signal.SIGTERM)],
)
def test_interrupt_during_a_slow_set_up_aborts_at_once_and_leaves_nothing(
    howfast: Howfast, target_dir: Path, phase: str, sig: signal.Signals
):
    """Issue 26, item 11: a SIGINT while a volume with much added latency was set up exited 1
    after 32 s, the run `failed` and its steps "unmounting the FUSE file failed … busy". At
    the bound (100 ms: a mount waits about 4 s, initdb comes some 10 s in), each layer's tool
    ends at once (the delay is lifted), and the run is `aborted`."""
    plan = howfast.plan(ONE_CLIENT.format(duration="2s"))
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--storage-latency",
                         "100ms", "--storage-size", "256MiB")  # fmt: skip
    deadline = time.monotonic() + 240
    while not set_up_process(target_dir, phase):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"the set-up never reached {phase}"
        time.sleep(0.05)
    tokens = volume_tokens(target_dir)
    assert tokens and layer_processes(target_dir, tokens), "nbdkit and nbdfuse run"
    proc.send_signal(sig)
    interrupted = time.monotonic()
    _, err = proc.communicate(timeout=120)
    took = time.monotonic() - interrupted
    assert proc.returncode == 130, err
    assert f"{sig.name}: stopping, the completed steps are kept" in err
    assert "still cleaning up" not in err and "failed" not in err, err
    assert took < 30, f"{took:.0f} s from SIGINT to exit"
    runs = json.loads(howfast("results", "list", "--json").stdout)
    assert [(r["status"], r["steps"]) for r in runs] == [("aborted", 0)]
    assert_nothing_left(target_dir, tokens)


# The script stands for howfast, which handles SIGINT whatever it inherited (early_signal.py):
# a test session started with SIGINT ignored (by a `cmd &` in a script) passes that on, and
# Python then keeps it ignored, so the test's SIGINT would be lost (seen: "still building
# 120 s after SIGINT" in a run started that way).
BUILD_ONE = """
import signal
import sys
from pathlib import Path
from howfast.targets.emulated.build import Limits
from howfast.targets.emulated.volume import EmulatedVolume

signal.signal(signal.SIGINT, signal.default_int_handler)
volume = EmulatedVolume(Path(sys.argv[1]), Path(sys.argv[2]), 64 << 20,
                        Limits(latency_ms=float(sys.argv[3])))
try:
    volume.build()
except KeyboardInterrupt:
    sys.exit(130)
volume.teardown()
"""


def kill_layers(workspace: Path, run_dir: Path) -> None:
    """The safety net of a test that fails: SIGKILL the volume's nbdkit, so that every request
    in flight fails at once and nothing waits out 20 s per I/O (a hung losetup holds every
    loop device of the machine), then take down by hand what is left."""
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if cmdline.startswith("nbdkit") and str(workspace) in cmdline:
            os.kill(int(proc.name), signal.SIGKILL)
    time.sleep(1)
    mounts = Path("/proc/self/mounts").read_text()
    if str(workspace / "mnt") in mounts:
        subprocess.run(["umount", "-l", str(workspace / "mnt")], check=False)
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            if backing.read_text().startswith(str(run_dir / "fuse" / "nbd")):
                subprocess.run(["losetup", "-d", f"/dev/{backing.parent.parent.name}"])
    if str(run_dir / "fuse") in mounts:
        time.sleep(1)
        subprocess.run(["umount", "-l", str(run_dir / "fuse")], check=False)


@pytest.mark.parametrize("phase", ["losetup", "mount"])
def test_a_volume_being_built_with_a_long_delay_stops_in_seconds(tmp_path: Path, phase: str):
    """Interruptible whatever the delay: the bound of --storage-latency (100 ms) is the
    user's, the volume's set-up stops at once even at the issue's 20 s per I/O, where a mount
    (about 40 delayed I/Os, uninterruptible) would take 14 minutes and losetup (one read, while
    it holds every loop device of the machine) 20 s: the delay is lifted for the tool in
    flight, then every layer comes down.

    The bound is less than one delayed I/O (20 s): had the set-up or the teardown waited out
    any, the exit would come later. Measured (issue 34) at a load average of 6 to 16 on 2
    cores: 3 s from SIGINT to exit, 2 of them nbdkit's grace before its SIGTERM, since
    removed. (A request still stuck 10 s after the delay is lifted, SETTLE_S, is failed by
    killing nbdkit.)"""
    workspace = Path(tempfile.mkdtemp(prefix="howfast-vol-test-", dir="/var/tmp"))
    run_dir = Path(tempfile.mkdtemp(prefix="howfast-vol-test-", dir="/dev/shm"))
    script = tmp_path / "build_one.py"
    script.write_text(BUILD_ONE)
    proc = subprocess.Popen([sys.executable, str(script), str(workspace), str(run_dir), "20000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        # The tool waits for its first delayed read.
        while not any(line.startswith(f"{phase} ") for line in layer_commands(workspace, run_dir)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"{phase} never started"
            time.sleep(0.05)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            blocked = layer_states(workspace, run_dir)
            kill_layers(workspace, run_dir)
            proc.communicate(timeout=120)
            raise AssertionError(f"still building 120 s after SIGINT; {blocked}") from None
        took = time.monotonic() - interrupted
        assert proc.returncode == 130, err
        assert took < 20, f"{took:.0f} s from SIGINT to exit"
        assert [p.name for p in workspace.iterdir()] == []  # no image, no mount point
        assert not (run_dir / "fuse").exists()  # the FUSE file's mount point is gone too
        assert [line for line in Path("/proc/self/mounts").read_text().splitlines()
                if str(workspace) in line or str(run_dir) in line] == []  # fmt: skip
        assert [line for line in loop_devices() if str(run_dir) in line] == []
        assert layer_commands(workspace, run_dir) == []
    finally:
        kill_layers(workspace, run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(workspace, ignore_errors=True)


def layer_states(workspace: Path, run_dir: Path) -> list[str]:
    """What each process of the volume is blocked on (state, kernel wait channel), to say
    where a stop that never comes is stuck."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
            wchan = (proc / "wchan").read_text()
        except (OSError, IndexError):
            continue
        if str(workspace) in cmdline or str(run_dir) in cmdline:
            found.append(f"{proc.name} {state} {wchan}: {cmdline[:120]}")
    return found


def layer_commands(workspace: Path, run_dir: Path) -> list[str]:
    """Command lines of the processes working on a volume in `workspace` and `run_dir`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        mine = str(workspace) in cmdline or str(run_dir) in cmdline
        if mine and not cmdline.startswith(sys.executable):
            found.append(cmdline)
    return found
