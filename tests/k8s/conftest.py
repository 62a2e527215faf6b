"""Kubernetes tests run against a real cluster of two nodes that tests/k8s/lab builds and starts.

`make test` runs them (scripts/test.sh, unless HOWFAST_K8S_LAB=0), as do `make k8s-lab` and
`HOWFAST_K8S_LAB=1 pytest -m k8s tests/k8s`; a plain `pytest` skips them with that hint (the
cluster needs root, ~15 s to start, ~15 min to build the first time). When the machine
cannot run the lab (no root, no Go to build, ports in use, ...) they are skipped with the
exact reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.k8s import lanes
from tests.k8s.lab import build, cluster, cnpg, dockerfile_image
from tests.k8s.lab.cluster import ClusterFacts
from tests.k8s.lab.config import NODES_ENV, Paths
from tests.k8s.lab.proc import LabUnavailable

HERE = Path(__file__).resolve().parent
LABEL = "app.kubernetes.io/managed-by=howfast"
# A cold build (~15 min) happens inside the first test's setup: give that test room for it.
BUILD_TIMEOUT_S = 3600
# howfast's image of the checkout (lab/howfast_image.py), built and imported beside the first
# tests: how much longer than its own bound the first test that needs it may take
IMAGE_WAIT_S = 900


# Tests on the Cluster lab/pg (tests/k8s/lab/cnpg.py) carry `lab_pg_cluster(ORDER)`: they
# run last but the lab's teardown, by ORDER (the one that deletes it, last of all).
LAB_PG_MARKER = "lab_pg_cluster"
WANTS_LAB_PG = pytest.StashKey[bool]()
WANTS_HOWFAST_IMAGE = pytest.StashKey[bool]()


def _opted_in(config: pytest.Config) -> bool:
    if os.environ.get("HOWFAST_K8S_LAB") == "1":
        return True
    markexpr = str(config.getoption("markexpr", "") or "")
    return "k8s" in markexpr and "not k8s" not in markexpr


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if HERE in Path(str(item.path)).parents]
    if not ours:
        return
    # The tests on the lab's shared CloudNativePG Cluster run after the others (the operator
    # makes it while they run: `_made_early`), in their marker's order; a test that takes
    # the lab down runs after every other test that needs it.
    on_pg = sorted(
        (item for item in items if item.get_closest_marker(LAB_PG_MARKER)),
        key=lambda item: int(item.get_closest_marker(LAB_PG_MARKER).args[0]),  # type: ignore[union-attr]
    )
    last = [item for item in items if item.get_closest_marker("lab_teardown")]
    if on_pg or last:
        items[:] = [item for item in items if item not in on_pg and item not in last]
        items += on_pg + last
    if not _opted_in(config):
        skip = pytest.mark.skip(
            reason="k8s lab tests run in `make test`, `make k8s-lab` or "
            "HOWFAST_K8S_LAB=1 pytest -m k8s (HOWFAST_K8S_LAB=0 skips them)"
        )
        for item in ours:
            item.add_marker(skip)
        return
    if not build.is_built(Paths.default()):
        ours[0].add_marker(pytest.mark.timeout(BUILD_TIMEOUT_S))
    # The first test that needs howfast's image waits in its setup for what `_made_early`
    # has not finished of it (in CI the in-cluster run's first test timed out; here, beside
    # two busy loops, it waited 255-265 s): room for that wait on top of its own bound.
    needing_image = [item for item in ours if "howfast_image" in getattr(item, "fixturenames", ())]
    if needing_image:
        first = needing_image[0]
        marker = first.get_closest_marker("timeout")
        own = float(marker.args[0]) if marker and marker.args else float(config.getini("timeout"))
        first.add_marker(pytest.mark.timeout(own + IMAGE_WAIT_S))


def pytest_collection_finish(session: pytest.Session) -> None:
    """What `_made_early` starts as the lab comes up: only what the selected tests need."""
    ours = [item for item in session.items if HERE in Path(str(item.path)).parents]
    session.config.stash[WANTS_LAB_PG] = any(i.get_closest_marker(LAB_PG_MARKER) for i in ours)
    session.config.stash[WANTS_HOWFAST_IMAGE] = any(
        "howfast_image" in getattr(item, "fixturenames", ()) for item in ours
    )


@dataclass
class Kube:
    """kubectl against the lab cluster, with argument lists only."""

    facts: ClusterFacts

    def __call__(
        self, *args: str, input: str | None = None, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.facts.kubectl), "--kubeconfig", str(self.facts.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}"
            )
        return proc

    def apply(self, obj: dict[str, Any]) -> None:
        self("apply", "-f", "-", input=json.dumps(obj))

    def get(self, *args: str) -> Any:
        return json.loads(self("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="session")
def k8s_lab() -> Iterator[ClusterFacts]:
    """The running lab cluster for the whole session; always torn down afterwards (in lanes,
    tests/k8s/lanes.py: by the lane that started it, once the other has ended)."""
    paths = Paths.default()
    if lanes.lane() == lanes.GUEST:
        lanes.hold_while_running()
        reason = lanes.wait_for_owner()
        if reason is not None:
            pytest.skip(reason)
        yield cluster.facts(paths, nodes=len(cluster.status(paths)["nodes"]))
        return
    if not build.is_built(paths):
        blocker = build.build_blockers(paths)
        if blocker:
            lanes.announce(False, f"k8s lab cannot be built here: {blocker}")
            pytest.skip(f"k8s lab cannot be built here: {blocker}")
    with contextlib.ExitStack() as stack:
        try:
            facts = stack.enter_context(cluster.lab(paths))
        except LabUnavailable as exc:
            lanes.announce(False, f"k8s lab cannot run here: {exc}")
            pytest.skip(f"k8s lab cannot run here: {exc}")
        except BaseException:
            lanes.announce(False, "the owner lab lane failed to start the lab")
            raise
        lanes.announce(True)
        yield facts
        lanes.wait_for_peers()


@pytest.fixture(scope="session")
def kube(k8s_lab: ClusterFacts) -> Kube:
    return Kube(k8s_lab)


@dataclass(frozen=True)
class TwoNodes:
    """The lab's two nodes, and the StorageClass whose volumes both of them can mount."""

    first: str  # "localhost"
    second: str  # "127.0.0.2"
    shared_storage_class: str  # "lab-shared": no node affinity, emulates network storage
    shared_volume_dir: Path  # the host directory that class's volumes are made in


@pytest.fixture(scope="session")
def two_nodes(k8s_lab: ClusterFacts) -> TwoNodes:
    """For tests that move pods between nodes or put a client on another node. The lab starts
    two nodes unless told otherwise; a lab started by hand with one is skipped with why."""
    if len(k8s_lab.nodes) < 2:
        pytest.skip(
            f"the lab has one node ({k8s_lab.nodes[0]}): it was started with --nodes 1 or"
            f" {NODES_ENV}=1 (by hand: `python -m tests.k8s.lab down`, then `up` starts two)"
        )
    first, second = k8s_lab.nodes[:2]
    shared = k8s_lab.shared_storage_class
    return TwoNodes(first, second, shared, k8s_lab.volume_dirs[shared])


# A pod of the lab not ready after this long is stuck: howfast then says what it waits for
# (its own message), well before run_howfast's time-out would hide it behind a SIGABRT.
POD_START_TIMEOUT_S = "120"


@pytest.fixture(scope="session")
def lane_kubeconfig(k8s_lab: ClusterFacts, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kubeconfig howfast runs with: the lab's, or in the guest lane a copy whose context
    names its namespace, where its howfast runs then make their objects (lanes.py)."""
    if lanes.lane() != lanes.GUEST:
        return k8s_lab.kubeconfig
    Kube(k8s_lab).apply({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": lanes.GUEST_NAMESPACE}})  # fmt: skip
    copy = tmp_path_factory.mktemp("lane") / "kubeconfig"
    shutil.copy(k8s_lab.kubeconfig, copy)
    subprocess.run(
        [str(k8s_lab.kubectl), "--kubeconfig", str(copy), "config", "set-context", "--current",
         f"--namespace={lanes.GUEST_NAMESPACE}"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return copy


@pytest.fixture
def howfast_env(k8s_lab: ClusterFacts, lane_kubeconfig: Path, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "KUBECONFIG": str(lane_kubeconfig),
        "HOWFAST_K8S_PULL_POLICY": "Never",
        "HOWFAST_K8S_START_TIMEOUT": POD_START_TIMEOUT_S,
        "HOWFAST_STORE": str(tmp_path / "store.db"),
    }


def lab_images(facts: ClusterFacts) -> list[str]:
    return ["--image", facts.pg_image, "--fio-image", facts.pg_image]


def run_howfast(
    env: dict[str, str], *args: str, timeout: float = 180, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """howfast in a process of its own. When it outlives `timeout`, SIGABRT makes Python's
    faulthandler print where every thread of it is blocked, and the failure shows that. The
    time-out and the cleanup after it stay within pytest's 300 s a test, which would otherwise
    end the test first and show nothing of where howfast hung (seen once in CI: a 36 s run)."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "howfast", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        stdout, stderr = proc.communicate()
        cluster_state = _cluster_snapshot(env)  # before the cleanup below removes it
        # what the aborted run left would fail the tests after this one too; --k8s: never
        # this machine's part, where the other tests' runs live beside the lab's
        subprocess.run(
            [sys.executable, "-m", "howfast", "cleanup", "--k8s", "--yes", *lanes.cleanup_scope()],
            env=env,
            capture_output=True,
            timeout=100,
        )
        raise AssertionError(
            f"howfast {' '.join(args)} still ran after {timeout:g} s; its threads:\n{stderr}"
            f"\nthe cluster then:\n{cluster_state}"
        ) from None
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if check and done.returncode != 0:
        raise AssertionError(f"howfast {' '.join(args)} -> {done.returncode}\n{done.stderr}")
    return done


def wait_for_line(proc: subprocess.Popen[str], marker: str, timeout: float) -> list[str]:
    """The lines `proc` printed on stderr up to the first that holds `marker`. A thread reads
    them (and goes on draining stderr afterwards), so that a howfast that prints nothing more
    fails the test after `timeout` s with what it printed, instead of blocking it until
    pytest's time-out."""
    assert proc.stderr is not None
    stream = proc.stderr
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True, name="stderr-pump").start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(
                f"no {marker!r} from howfast in {timeout:g} s; it printed:\n{''.join(seen)}"
            ) from None
        if line is None:
            raise AssertionError(f"howfast ended before {marker!r}:\n{''.join(seen)}")
        seen.append(line)
        if marker in line:
            return seen


def reap(proc: subprocess.Popen[str]) -> None:
    """Kill `proc` if it still runs, and wait for it: a killed howfast left unwaited for is a
    zombie whose PID still answers, and `howfast cleanup` then takes its run for a live one."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def _cluster_snapshot(env: dict[str, str]) -> str:
    """Pods, nodes and the last events of the lab, as kubectl prints them: what a hung run
    was waiting for (a pod Pending, a node NotReady, an API server that stopped answering)."""
    kubectl = str(Paths.default().kubectl)
    out = []
    for args in (
        ["get", "nodes", "-o", "wide"],
        ["get", "pods", "-A", "-o", "wide"],
        ["get", "events", "-A", "--sort-by=.lastTimestamp"],
    ):
        started = time.monotonic()
        try:
            proc = subprocess.run(
                [kubectl, "--request-timeout=10s", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=20,
            )
            text = (proc.stdout + proc.stderr).splitlines()[-25:]
        except (OSError, subprocess.TimeoutExpired) as exc:
            text = [f"({exc})"]
        took = time.monotonic() - started
        out.append(f"$ kubectl {' '.join(args)}  ({took:.1f} s)\n" + "\n".join(text))
    return "\n".join(out)


LABELLED_KINDS = {
    "Pod": "pod",
    "PersistentVolumeClaim": "pvc",
    "ConfigMap": "configmap",
    "Service": "service",
    "NetworkPolicy": "networkpolicy",
    "Secret": "secret",
}


def leftovers(kube: Kube) -> dict[str, list[str]]:
    """howfast's labelled objects and every volume but lab/pg's (is_lab_pg_volume), of this
    lane's namespaces (lanes.py: all of them in a single session), by kubectl's short kind
    names; in two
    kubectl calls (the tests poll this: each kubectl costs CPU the other tests need)."""
    found: dict[str, list[str]] = {}
    labelled = kube.get(",".join(LABELLED_KINDS.values()), "-A", "-l", LABEL)["items"]
    for item in labelled:
        if lanes.sees_namespace(item["metadata"].get("namespace")):
            found.setdefault(LABELLED_KINDS[item["kind"]], []).append(item["metadata"]["name"])
    volumes = [
        i["metadata"]["name"]
        for i in kube.get("pv")["items"]
        if not is_lab_pg_volume(i) and lanes.sees_volume(i)
    ]
    if volumes:
        found["pv"] = volumes
    return found


def assert_clean(kube: Kube, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (left := leftovers(kube)) and time.monotonic() < deadline:
        time.sleep(1)
    assert left == {}


def write_plan(tmp_path: Path, text: str, name: str = "plan.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


class Background:
    """Slow work asked for as the lab comes up, in a thread of its own, while the first tests
    run (it mostly waits: the operator making a Cluster, image imports); `result` waits for
    it and raises what it raised."""

    def __init__(self, name: str, work: Callable[[], Any]) -> None:
        self.work = work
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.value = self.work()
        except BaseException as exc:  # raised by result(), in the test that needs it
            self.error = exc

    def result(self, timeout: float) -> Any:
        self.thread.join(timeout=timeout)
        if self.thread.is_alive():
            raise AssertionError(f"{self.thread.name} still ran after {timeout:g} s")
        if self.error is not None:
            raise self.error
        return self.value


def _install_and_ask(facts: ClusterFacts) -> float:
    """The operator installed, then lab/pg asked for (not waited for); the install's seconds."""
    took = cnpg.install(Paths.default(), storage_class=facts.default_storage_class)
    kube = Kube(facts)
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": cnpg.CLUSTER_NAMESPACE}})  # fmt: skip
    kube.apply(cnpg.lab_cluster_object(facts.default_storage_class))
    return took


def _image_in_nodes(facts: ClusterFacts) -> str:
    """howfast's image of this checkout in every node's containerd (built by howfast_image.py,
    or from deploy/Dockerfile.howfast with HOWFAST_K8S_LAB_HOWFAST_IMAGE=dockerfile)."""
    paths = Paths.default()
    started = time.monotonic()
    builder = dockerfile_image.selected_builder()
    ref, tarball = builder.ensure_image(paths)
    builder.import_image(paths, tarball, ref, len(facts.nodes))
    print(f"howfast image {ref} ready in {time.monotonic() - started:.1f}s")
    return str(ref)


@pytest.fixture(scope="session", autouse=True)
def _made_early(request: pytest.FixtureRequest) -> Iterator[dict[str, Background]]:
    """As the lab comes up, in threads: the operator installed and lab/pg asked for, when the
    session has tests on lab/pg; howfast's image built and imported, when it has tests that
    need it. The fixtures `cnpg_operator`, `lab_pg_cluster` and `howfast_image` wait for
    them."""
    early: dict[str, Background] = {}
    if request.config.stash.get(WANTS_LAB_PG, False):
        facts: ClusterFacts = request.getfixturevalue("k8s_lab")
        early["cnpg"] = Background("cnpg-early", lambda: _install_and_ask(facts))
    if request.config.stash.get(WANTS_HOWFAST_IMAGE, False):
        facts = request.getfixturevalue("k8s_lab")
        early["howfast_image"] = Background("image-early", lambda: _image_in_nodes(facts))
    yield early
    for work in early.values():
        work.thread.join(timeout=300)


@pytest.fixture(scope="session")
def howfast_image(k8s_lab: ClusterFacts, _made_early: dict[str, Background]) -> str:
    """howfast's image of this checkout, in every node's containerd: its reference."""
    early = _made_early.get("howfast_image")
    if early is not None:
        return str(early.result(timeout=BUILD_TIMEOUT_S))
    return _image_in_nodes(k8s_lab)


@pytest.fixture(scope="session")
def cnpg_operator(k8s_lab: ClusterFacts, _made_early: dict[str, Background]) -> float:
    """The CloudNativePG operator (tests/k8s/lab/cnpg.py), installed once per session: early
    when tests on lab/pg need it, else the first time a test asks for it (built first if
    needed: a cold build takes minutes); its webhooks answer when this returns the seconds
    the install took. Left installed: `down` removes it with the lab; a lab started by hand
    keeps it (`cnpg uninstall` removes it)."""
    early = _made_early.get("cnpg")
    try:
        if early is not None:
            return float(early.result(timeout=BUILD_TIMEOUT_S))
        return cnpg.install(Paths.default(), storage_class=k8s_lab.default_storage_class)
    except LabUnavailable as exc:
        pytest.skip(f"the CloudNativePG operator cannot be built here: {exc}")


# initdb, then the standby's pg_basebackup, each in a pod of its own, on a loaded 2-core machine
LAB_PG_HEALTHY_TIMEOUT_S = 600


@pytest.fixture(scope="session")
def lab_pg_cluster(cnpg_operator: float, k8s_lab: ClusterFacts, kube: Kube) -> Iterator[str]:
    """The Cluster lab/pg (cnpg.lab_cluster_object: 2 instances, a synchronous standby, WAL
    on a volume of its own), healthy; shared by the tests marked `lab_pg_cluster`, the last
    of which deletes it (deleted here too in case it did not run)."""
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": cnpg.CLUSTER_NAMESPACE}}  # fmt: skip
    kube.apply(namespace)  # asked for early, unless this session did not (then now)
    kube.apply(cnpg.lab_cluster_object(k8s_lab.default_storage_class))
    try:
        wait_lab_pg_healthy(kube)
        yield cnpg.CLUSTER_NAME
    finally:
        kube("-n", cnpg.CLUSTER_NAMESPACE, "delete", "cluster", cnpg.CLUSTER_NAME,
             "--ignore-not-found", "--wait=true", timeout=300, check=False)  # fmt: skip


def wait_lab_pg_healthy(kube: Kube, timeout: float = LAB_PG_HEALTHY_TIMEOUT_S) -> dict[str, Any]:
    """lab/pg healthy with its 2 instances ready: the Cluster object then."""
    deadline = time.monotonic() + timeout
    while True:
        found = kube.get("cluster", cnpg.CLUSTER_NAME, "-n", cnpg.CLUSTER_NAMESPACE)
        status = found.get("status") or {}
        if cnpg.is_healthy(status, 2):
            return dict(found)
        if time.monotonic() > deadline:
            raise AssertionError(f"Cluster lab/pg not healthy: {json.dumps(status)[:2000]}")
        time.sleep(2)


def is_lab_pg_volume(pv: dict[str, Any]) -> bool:
    """A volume of lab/pg's claims (pg-N, pg-N-wal in namespace lab): the user's cluster,
    made by the tests, not by howfast; it lives through the other tests."""
    ref = pv.get("spec", {}).get("claimRef") or {}
    pattern = rf"{re.escape(cnpg.CLUSTER_NAME)}-\d+(-wal)?"
    return ref.get("namespace") == cnpg.CLUSTER_NAMESPACE and bool(
        re.fullmatch(pattern, str(ref.get("name", "")))
    )
