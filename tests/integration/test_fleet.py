"""Fleets on real instances: real PostgreSQL clusters started together, real cgroup I/O
limits on the disk behind the target, an instance dying mid-step, and Ctrl-C with every
instance running."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from howfast.machine.cgroup import detect_io
from howfast.targets.fleet import fleet_device
from tests.conftest import cgroup_dirs
from tests.integration.conftest import Howfast, postgres_pids_under

pytestmark = pytest.mark.integration

CGROUPS = detect_io()
needs_limits = pytest.mark.skipif(
    CGROUPS.version is None, reason=f"no cgroup I/O limits here: {CGROUPS.reason}"
)

# Every transaction logged (`latency_log = "full"`), as a sampled log of these few hundred
# commits a second would be: without it each of the four instances first runs an unmeasured
# calibration of a second, all at once (workloads/pgbench/logsampling.py).
FLEET = """
[settings]
shared_buffers = "16MB"
max_connections = "20"
[fleet]
classes = [
  {{ name = "capped", count = 2, write_iops = 100 }},
  {{ name = "free", count = 2 }},
]
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2]
duration = "{duration}"
latency_log = "full"
"""


def howfast_cgroups() -> set[str]:
    return {str(p) for p in cgroup_dirs("howfast-fleet-*")}


def assert_nothing_left(target_dir: Path, cgroups_before: set[str]) -> None:
    assert list(target_dir.iterdir()) == []
    assert postgres_pids_under(target_dir) == []
    assert howfast_cgroups() == cgroups_before


@needs_limits
def test_a_capped_class_measures_at_its_cap_and_below_the_free_one(
    howfast: Howfast, target_dir: Path
):
    if isinstance(fleet_device(target_dir), str):
        pytest.skip(f"no disk to limit: {fleet_device(target_dir)}")
    before = howfast_cgroups()
    plan = howfast.plan(FLEET.format(duration="3s"))
    out = howfast("run", str(plan), "--target", str(target_dir), "--json", timeout=400)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert len(doc["targets"]) == 4
    classes = {c["class"]: c for c in doc["fleet"]["classes"] if c["test"].startswith("pgbench")}
    capped, free = classes["capped"], classes["free"]
    assert capped["instances"] == free["instances"] == 2
    assert max(capped["write_iops"]) <= 100 * 1.1, capped
    assert max(capped["write_iops"]) < min(free["write_iops"]), (capped, free)
    assert capped["tps_per_instance"]["max"] < free["tps_per_instance"]["min"]
    (held,) = capped["enforcement"]
    # The verdict follows the figure (analysis/fleet.py): "held" at 80-110% of the cap, "not
    # reached" below 80%, which happens when other work on the disk slows the instance (69 of
    # 100 was seen beside the other test worker). Either way the cap was not exceeded.
    # The document keeps one decimal and the verdict rounds the unrounded figure, so 68.5 in the
    # document may read "69" in the verdict: compare numbers, not strings.
    top = max(capped["write_iops"])
    verdict = "held" if top >= 80 else "was not reached"
    if abs(top - 80) < 0.05:  # the document's rounding hides which side of 80% it was on
        verdict = "(?:held|was not reached)"
    said = re.fullmatch(rf"the write limit {verdict}: at most ([\d,]+) of 100 IOPS", held)
    assert said, held
    assert abs(float(said.group(1).replace(",", "")) - top) <= 0.55, (held, top)
    # One progress line per class, with its total.
    assert "capped: 2/2 instances completed" in out.stderr
    assert "free: 2/2 instances completed" in out.stderr
    assert_nothing_left(target_dir, before)


def _wait_for(proc, text: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline and text not in seen:
        seen += proc.stderr.readline()
    assert text in seen, seen


@needs_limits
def test_one_dying_instance_fails_its_step_and_the_others_go_on(howfast: Howfast, target_dir: Path):
    before = howfast_cgroups()
    plan = howfast.plan(FLEET.format(duration="8s") + "rate = 100\n")  # statuses, not TPS
    proc = howfast.popen("run", str(plan), "--target", str(target_dir), "--json")
    _wait_for(proc, "tpcb-like")
    time.sleep(2)
    pidfile = next(target_dir.glob("howfast-fleet-*/classes-free-1/howfast-*/data/postmaster.pid"))
    os.kill(int(pidfile.read_text().splitlines()[0]), signal.SIGKILL)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err
    doc = json.loads(out)
    runs = {s["target"].rsplit(" ", 1)[1]: s for s in doc["steps"] if s["workload"] == "pgbench"}
    assert runs["classes/free-1"]["status"] == "failed"
    assert "server log" in runs["classes/free-1"]["error"]
    assert [runs[n]["status"] for n in ("classes/capped-1", "classes/capped-2",
                                        "classes/free-2")] == ["completed"] * 3  # fmt: skip
    assert "classes/free-1: failed" in err
    assert_nothing_left(target_dir, before)


@needs_limits
def test_interrupt_with_every_instance_running_leaves_nothing(howfast: Howfast, target_dir: Path):
    before = howfast_cgroups()
    # rate: the step only holds the run while the test interrupts it; not flat out
    plan = howfast.plan(FLEET.format(duration="60s") + "rate = 50\n")
    proc = howfast.popen("run", str(plan), "--target", str(target_dir))
    _wait_for(proc, "tpcb-like")
    time.sleep(2)
    assert len({p for p in postgres_pids_under(target_dir)}) >= 4
    # A fleet holds its directory's run lock, as any run does: no other run starts there,
    # and howfast cleanup leaves its instances alone.
    again = howfast("run", "quick", "--target", str(target_dir))
    assert again.returncode == 2 and f"(PID {proc.pid})" in again.stderr, again.stderr
    listed = json.loads(howfast("cleanup", "--target", str(target_dir), "--json").stdout)
    found = {(x["kind"], x["state"]) for x in listed["local"]["leftovers"]}
    assert ("fleet", "in use") in found and {s for _, s in found} == {"in use"}, found
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    listed = json.loads(howfast("results", "list", "--json").stdout)
    assert [r["status"] for r in listed] == ["aborted"]
    assert_nothing_left(target_dir, before)


def test_limits_that_cannot_hold_here_are_refused_before_anything(
    howfast: Howfast, target_dir: Path
):
    weights = FLEET.format(duration="3s").replace("write_iops = 100", "weight = 500")
    out = howfast("run", str(howfast.plan(weights)), "--target", str(target_dir))
    device = fleet_device(target_dir)
    if not isinstance(device, str) and device.scheduler == "bfq" and CGROUPS.version:
        pytest.skip("this disk runs bfq: weights would be enforced")
    assert out.returncode == 2, out.stderr
    assert "fleet class capped (weight 500) cannot be enforced" in out.stderr
    assert list(target_dir.iterdir()) == []
    second = target_dir.parent / "second"
    second.mkdir()
    two = howfast("run", str(howfast.plan(FLEET.format(duration="3s"))), "--target",
                  str(target_dir), "--target", str(second))  # fmt: skip
    assert two.returncode == 2 and "a fleet runs on one target: a directory" in two.stderr
    assert list(second.iterdir()) == []
    k8s_class = FLEET.format(duration="3s").replace("write_iops = 100", 'storage_class = "fast"')
    out = howfast("run", str(howfast.plan(k8s_class)), "--target", str(target_dir))
    assert out.returncode == 2 and "storage_class applies to k8s:// targets only" in out.stderr
    assert list(target_dir.iterdir()) == []


def test_live_metrics_of_a_fleet_carry_each_instances_class(howfast: Howfast, target_dir: Path):
    """The plan's metrics_port serves /metrics while the fleet runs, labelled by class."""
    import re
    import urllib.request

    from tests.conftest import free_port

    port = free_port()
    text = FLEET.format(duration="6s").replace(", write_iops = 100", "") + "rate = 100\n"
    plan = howfast.plan(f"metrics_port = {port}\n" + text)
    proc = howfast.popen("run", str(plan), "--target", str(target_dir))
    _wait_for(proc, "tpcb-like")
    # TPS exists from an instance's first progress line (on a busy machine some seconds):
    # read the page until both classes have it, or the step ends.
    classes: set[str] = set()
    deadline = time.monotonic() + 60
    while classes != {"capped", "free"} and time.monotonic() < deadline and proc.poll() is None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            page = response.read().decode()
        classes = set(re.findall(r'howfast_tps\{[^}]*class="([a-z-]+)"', page))
        time.sleep(0.5)
    # A scraper that has read /metrics is waited for after the run, up to LINGER_S (15 s),
    # for one last scrape of the final figures: go on scraping, as Prometheus would, so
    # that howfast ends at once instead of after that wait.
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),  # the exporter stops when the run is over
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response,
        ):
            response.read()
        time.sleep(0.5)
    proc.communicate(timeout=240)
    assert proc.returncode == 0
    assert classes == {"capped", "free"}, page[:2000]
    assert list(target_dir.iterdir()) == []


def test_a_kubernetes_fleet_dry_run_prints_every_instance_without_a_cluster(
    howfast: Howfast, monkeypatch: pytest.MonkeyPatch
):
    """No cluster here: a dry run needs none (the lab tests run the same fleet for real)."""
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    plan = howfast.plan(
        FLEET.format(duration="3s").replace(
            '{ name = "capped", count = 2, write_iops = 100 }',
            '{ name = "gold", count = 2, storage_class = "fast", volume_attributes_class = "g" }',
        )
    )
    out = howfast("run", str(plan), "--target", "k8s://slow", "--namespace", "bench",
                  "--dry-run", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    targets = json.loads(out.stdout)["targets"]
    assert [t["name"] for t in targets] == [
        "k8s://slow classes/gold-1", "k8s://slow classes/gold-2",
        "k8s://slow classes/free-1", "k8s://slow classes/free-2",
    ]  # fmt: skip
    claims = [
        m["spec"] for t in targets for m in t["manifests"] if m["kind"] == "PersistentVolumeClaim"
    ]
    assert [c["storageClassName"] for c in claims] == ["fast", "fast", "slow", "slow"]
    assert [c.get("volumeAttributesClassName") for c in claims] == ["g", "g", None, None]
    runs = {m["metadata"]["labels"]["howfast.dev/run"] for t in targets for m in t["manifests"]}
    assert len(runs) == 4  # each instance its own run label, so each is removed on its own
    capped = howfast.plan(FLEET.format(duration="3s"), name="capped.toml")
    refused = howfast("run", str(capped), "--target", "k8s://slow", "--dry-run")
    assert refused.returncode == 2 and "cannot cap a pod's I/O" in refused.stderr


def test_an_instance_whose_load_failed_skips_the_steps_that_read_it(
    howfast: Howfast, target_dir: Path
):
    """Issue 26, item 4, in a fleet: each instance's load fails (a tablespace that does not
    exist), so no instance measures tables that are not there."""
    plan = howfast.plan(
        FLEET.replace('{{ name = "capped", count = 2, write_iops = 100 }},\n', "")
        .replace("scale = 1\n", 'scale = 1\nextra_args = ["--tablespace=no_such_tablespace"]\n')
        .format(duration="1s")
    )
    out = howfast("run", str(plan), "--target", str(target_dir), "--json", timeout=300)
    assert out.returncode == 1, out.stderr
    steps = json.loads(out.stdout)["steps"]
    assert [(s["workload"], s["status"]) for s in steps] == [
        ("pgbench-init", "failed"),
        ("pgbench-init", "failed"),
        ("pgbench", "skipped"),
        ("pgbench", "skipped"),
    ]
    for skipped in (s for s in steps if s["status"] == "skipped"):
        assert "(pgbench -i scale 1) failed, so the tables this step reads" in skipped["error"]
        assert "no_such_tablespace" in skipped["error"]
    assert list(target_dir.iterdir()) == []
