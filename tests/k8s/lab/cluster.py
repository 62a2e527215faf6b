"""Start, stop and inspect the lab cluster: a real single-node Kubernetes on loopback only.

up():   etcd, containerd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and two
        local-path-provisioner processes, each a child in its own session, recorded by PID and
        start time in run/state.json before anything else happens; host state is recorded first.
down(): stops all of it (by recorded PID; container shims by our socket path; pod processes by
        the cgroups our kubelet made), unmounts everything below run/, restores sysctls,
        iptables chains and host paths. Safe to call at any time, any number of times; `up`
        calls it first when a previous session left state behind (e.g. it was SIGKILLed).
lab():  a context manager for test sessions: up, yield the facts, and down in every case
        (exceptions, atexit, SIGTERM/SIGHUP/SIGINT).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tests.k8s.lab import build, config, hoststate, manifests
from tests.k8s.lab.config import Paths
from tests.k8s.lab.proc import (
    LabError,
    LabUnavailable,
    is_same_process,
    log,
    proc_start_time,
    run,
    stop_processes,
    wait_until,
)

ETCD = Path("/usr/bin/etcd")
CONTAINERD = Path("/usr/bin/containerd")
CTR = Path("/usr/bin/ctr")
SHIM = Path("/usr/bin/containerd-shim-runc-v2")
CNI_LOOPBACK = Path("/usr/lib/cni/loopback")
# Stopped in this order: what creates objects first, the runtime after, the store last.
STOP_ORDER = (
    "provisioner-tmpfs",
    "provisioner-disk",
    "kube-scheduler",
    "kube-controller-manager",
    "kubelet",
)
STOP_ORDER_LATE = ("containerd", "kube-apiserver", "etcd")


@dataclass(frozen=True)
class ClusterFacts:
    kubeconfig: Path
    kubectl: Path
    server: str
    node: str
    k8s_version: str
    storage_classes: dict[str, str]
    default_storage_class: str
    provisioned_classes: tuple[str, ...]
    no_provisioner_class: str
    pg_image: str
    pg_uid: int
    pg_gid: int
    pg_bindir: str
    volume_dirs: dict[str, Path]
    cgroup_v2: bool
    started_in_s: float
    cache_dir: Path = field(default=Path())

    def as_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self), default=str))  # type: ignore[no-any-return]


# --- state file -----------------------------------------------------------------------------------


def _load_state(paths: Paths) -> dict[str, Any] | None:
    try:
        return json.loads(paths.state_file.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _save_state(paths: Paths, state: dict[str, Any]) -> None:
    tmp = paths.state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(paths.state_file)


# --- helpers --------------------------------------------------------------------------------------


def kubectl(
    paths: Paths, *args: str, input: str | None = None, timeout: float = 60, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return run(
        [paths.kubectl, "--kubeconfig", paths.admin_kubeconfig, *args],
        input=input,
        timeout=timeout,
        check=check,
    )


def _ctr(paths: Paths, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    argv: list[str | os.PathLike[str]] = [CTR, "--address", paths.containerd_sock]
    argv += ["--namespace", "k8s.io", *args]
    return run(argv, check=False, timeout=timeout)


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def run_blockers(paths: Paths) -> str | None:
    """Why the cluster cannot start here (after stale state is cleaned), or None."""
    if os.geteuid() != 0:
        return "the k8s lab needs root (containerd, kubelet)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (containerd's snapshotter needs it)"
    if not hoststate.cgroup_hierarchies():
        return "no cgroup filesystem mounted under /sys/fs/cgroup"
    for exe in (ETCD, CONTAINERD, CTR, CNI_LOOPBACK, Path("/usr/sbin/runc")):
        if not exe.exists():
            return f"{exe} is missing (run `python -m tests.k8s.lab build`)"
    sock = str(paths.containerd_sock) + ".ttrpc"
    if len(sock.encode()) > 107:
        return f"the cache dir path is too long for a unix socket path: {sock}"
    busy = [p for p in config.PORTS if _port_in_use(p)]
    if busy:
        return f"ports in use on 127.0.0.1 (another cluster or program?): {busy}"
    return None


class _Starter:
    """Starts the lab's processes and records each one in the state file at once."""

    def __init__(self, paths: Paths, state: dict[str, Any]) -> None:
        self.paths = paths
        self.state = state
        self.logs = paths.run / "logs"

    def start(self, name: str, argv: list[str | os.PathLike[str]], **env: str) -> None:
        log_path = self.logs / f"{name}.log"
        with log_path.open("ab") as out:
            proc = subprocess.Popen(
                [os.fspath(a) for a in argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the CLI; never gets the terminal's ^C
                env={**os.environ, **env},
                cwd=self.paths.run,
            )
        start_time = proc_start_time(proc.pid)
        self.state["processes"].append(
            {"name": name, "pid": proc.pid, "start_time": start_time, "argv0": str(argv[0])}
        )
        _save_state(self.paths, self.state)

    def alive(self, name: str) -> bool:
        for p in self.state["processes"]:
            if p["name"] == name:
                return is_same_process(p["pid"], p["start_time"])
        return False

    def wait(self, what: str, name: str, check: Any, timeout: float) -> None:
        """wait_until, but fail at once with the log's tail if process `name` died."""

        def probe() -> object:
            if not self.alive(name):
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
                raise _Died(f"{name} exited while waiting for {what}; its log ends with:\n{tail}")
            return check()

        try:
            wait_until(what, probe, timeout)
        except _Died as exc:
            raise LabError(str(exc)) from None
        log(f"{what}: ready")


class _Died(Exception):
    pass


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as resp:  # our own loopback URL
        return bool(resp.status == 200)


def _cmd_ok(argv: list[str | os.PathLike[str]]) -> bool:
    return run(argv, check=False, timeout=10).returncode == 0


# --- up -------------------------------------------------------------------------------------------


def _owner_alive(state: dict[str, Any]) -> bool:
    owner = state.get("owner")
    return owner is not None and is_same_process(owner["pid"], owner["start_time"])


def running_facts(paths: Paths) -> ClusterFacts | None:
    """The facts of a healthy lab started by hand (`python -m tests.k8s.lab up`) and still
    running from this cache dir, else None. A lab that a test session started is never
    adopted: its session tears it down, or it was killed and its lab is stale."""
    state = _load_state(paths)
    if state is None or not state["processes"] or state.get("owner", "?") is not None:
        return None
    alive = {p["name"] for p in state["processes"] if is_same_process(p["pid"], p["start_time"])}
    wanted = {*STOP_ORDER, *STOP_ORDER_LATE}
    if alive != wanted:
        return None
    if kubectl(paths, "get", "--raw", "/readyz", check=False, timeout=5).returncode != 0:
        return None
    return facts(paths)


def up(paths: Paths | None = None, owner_pid: int | None = None) -> ClusterFacts:
    """Build what is missing, clean what a previous session left, start the cluster.

    owner_pid: the process whose life bounds the cluster's (a test session), None for a lab
    started by hand. A healthy lab started by hand is returned as it is; a lab whose owner is
    still alive belongs to another session (LabUnavailable); any other state is stale and is
    cleaned up first."""
    paths = paths or Paths.default()
    build.ensure_built(paths)
    running = running_facts(paths)
    if running is not None:
        log("the lab is already running (started by hand): using it")
        return running
    state = _load_state(paths)
    if state is not None and _owner_alive(state) and state["owner"]["pid"] != os.getpid():
        raise LabUnavailable(f"the lab is in use by another session (pid {state['owner']['pid']})")
    if state is not None or _our_processes(paths):
        log("state of an earlier lab found (killed session?): cleaning it up first")
        down(paths)
    blocker = run_blockers(paths)
    if blocker:
        raise LabUnavailable(blocker)
    try:
        return _up(paths, owner_pid)
    except BaseException:
        log("start-up failed: tearing down what was started")
        down(paths)
        raise


def _up(paths: Paths, owner_pid: int | None) -> ClusterFacts:
    t0 = time.monotonic()
    r, b, p = paths.run, paths.bin, paths.pki
    for d in ("logs", "cni-bin", "cni-conf", "containerd", "kubelet", "pod-logs", "runc"):
        (r / d).mkdir(parents=True, exist_ok=True)
    # Host state first, saved before anything changes, so that down() can always restore it.
    state: dict[str, Any] = {"version": config.K8S_VERSION, "processes": [], "mounts": []}
    state.update(hoststate.snapshot())
    state["started_at"] = time.time()
    state["owner"] = (
        None if owner_pid is None else {"pid": owner_pid, "start_time": proc_start_time(owner_pid)}
    )
    _save_state(paths, state)
    starter = _Starter(paths, state)
    cgroup_v1 = not state["cgroup_v2"]

    # Volumes: one directory on disk, one on a tmpfs of its own.
    paths.disk_volumes.mkdir(exist_ok=True)
    paths.tmpfs_volumes.mkdir(exist_ok=True)
    state["mounts"].append(str(paths.tmpfs_volumes))
    _save_state(paths, state)
    run(
        [
            "mount", "-t", "tmpfs", "-o", f"size={config.TMPFS_SIZE},mode=0755",
            "howfast-lab-tmpfs", paths.tmpfs_volumes,
        ]
    )  # fmt: skip

    etcd_url = f"http://127.0.0.1:{config.ETCD_CLIENT_PORT}"
    peer_url = f"http://127.0.0.1:{config.ETCD_PEER_PORT}"
    starter.start(
        "etcd",
        [
            ETCD, "--name", "lab", "--data-dir", r / "etcd",
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"lab={peer_url}",
            "--listen-metrics-urls", f"http://127.0.0.1:{config.ETCD_METRICS_PORT}",
            "--quota-backend-bytes", str(1 << 30), "--snapshot-count", "10000",
        ],
    )  # fmt: skip
    starter.wait("etcd", "etcd", lambda: _http_ok(f"{etcd_url}/health"), 30)

    # containerd with a CNI chain that gives pods nothing but `lo`.
    for name, target in (("loopback", CNI_LOOPBACK), ("lo-only", b / "lo-only")):
        link = r / "cni-bin" / name
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    (r / "cni-conf" / "10-lo-only.conflist").write_text(manifests.cni_conflist())
    (r / "containerd" / "config.toml").write_text(manifests.containerd_config(paths))
    starter.start("containerd", [CONTAINERD, "--config", r / "containerd" / "config.toml"])
    starter.wait(
        "containerd",
        "containerd",
        lambda: _ctr(paths, "version").returncode == 0,
        30,
    )
    _import_images(paths)

    apiserver = b / "kube-apiserver"
    starter.start(
        "kube-apiserver",
        [
            apiserver, f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={config.API_PORT}",
            f"--service-cluster-ip-range={config.SERVICE_CIDR}",
            "--endpoint-reconciler-type=none",
            f"--tls-cert-file={p}/apiserver.crt", f"--tls-private-key-file={p}/apiserver.key",
            f"--client-ca-file={p}/ca.crt",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p}/sa.pub",
            f"--service-account-signing-key-file={p}/sa.key",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            f"--kubelet-client-certificate={p}/apiserver-kubelet-client.crt",
            f"--kubelet-client-key={p}/apiserver-kubelet-client.key",
            "--kubelet-preferred-address-types=Hostname",
            "--profiling=false", "--v=1",
        ],
    )  # fmt: skip
    starter.wait(
        "kube-apiserver",
        "kube-apiserver",
        lambda: kubectl(paths, "get", "--raw", "/readyz", timeout=5).returncode == 0,
        120,
    )

    common = ["--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false", "--v=1"]
    cm_kc = p / "controller-manager.kubeconfig"
    starter.start(
        "kube-controller-manager",
        [
            b / "kube-controller-manager", f"--kubeconfig={cm_kc}",
            f"--authentication-kubeconfig={cm_kc}", f"--authorization-kubeconfig={cm_kc}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={p}/sa.key", f"--root-ca-file={p}/ca.crt",
            f"--cluster-signing-cert-file={p}/ca.crt", f"--cluster-signing-key-file={p}/ca.key",
            f"--service-cluster-ip-range={config.SERVICE_CIDR}",
            *common,
        ],
    )  # fmt: skip
    sched_kc = p / "scheduler.kubeconfig"
    starter.start(
        "kube-scheduler",
        [
            b / "kube-scheduler", f"--kubeconfig={sched_kc}",
            f"--authentication-kubeconfig={sched_kc}", f"--authorization-kubeconfig={sched_kc}",
            *common,
        ],
    )  # fmt: skip

    kubelet_cfg = r / "kubelet" / "config.json"
    kubelet_cfg.write_text(manifests.kubelet_config(paths, cgroup_v1))
    starter.start(
        "kubelet",
        [
            b / "kubelet", f"--config={kubelet_cfg}", f"--kubeconfig={p}/kubelet.kubeconfig",
            f"--root-dir={r}/kubelet/root", f"--hostname-override={config.NODE_NAME}", "--v=1",
        ],
    )  # fmt: skip
    node = f"node/{config.NODE_NAME}"
    starter.wait(
        f"{node} Ready",
        "kubelet",
        lambda: (
            kubectl(
                paths, "wait", "--for=condition=Ready", node, "--timeout=2s", check=False
            ).returncode
            == 0
        ),
        180,
    )
    # A pod created before the default service account exists is refused.
    starter.wait(
        "service account default/default",
        "kube-controller-manager",
        lambda: kubectl(paths, "get", "serviceaccount", "default", check=False).returncode == 0,
        60,
    )

    # Storage: two dynamic provisioners on different storage + a class without one.
    kubectl(paths, "apply", "-f", "-", input=json.dumps(manifests.storage_objects()))
    helper = r / "helper-pod.json"
    helper.write_text(manifests.helper_pod())
    for key, name, provisioner, volumes in (
        ("disk", config.SC_DISK, config.PROVISIONER_DISK, paths.disk_volumes),
        ("tmpfs", config.SC_TMPFS, config.PROVISIONER_TMPFS, paths.tmpfs_volumes),
    ):
        cfg = r / f"provisioner-{key}.json"
        cfg.write_text(manifests.provisioner_config(volumes))
        starter.start(
            f"provisioner-{key}",
            [
                b / "local-path-provisioner", "start",
                "--kubeconfig", p / "provisioner.kubeconfig",
                "--namespace", manifests.STORAGE_NAMESPACE,
                "--service-account-name", manifests.PROVISIONER_SA,
                "--provisioner-name", provisioner,
                "--configmap-name", f"{name}-config",
                "--config", cfg,
                "--helper-pod-file", helper,
                "--helper-image", config.PG_IMAGE,
            ],
        )  # fmt: skip
    time.sleep(0.5)
    for key in ("disk", "tmpfs"):
        if not starter.alive(f"provisioner-{key}"):
            tail = (r / "logs" / f"provisioner-{key}.log").read_text()[-2000:]
            raise LabError(f"provisioner-{key} exited at start:\n{tail}")
    elapsed = time.monotonic() - t0
    log(f"cluster up in {elapsed:.1f}s (kubeconfig: {paths.admin_kubeconfig})")
    return facts(paths, elapsed)


def facts(paths: Paths, started_in_s: float = 0.0) -> ClusterFacts:
    return ClusterFacts(
        kubeconfig=paths.admin_kubeconfig,
        kubectl=paths.kubectl,
        server=f"https://127.0.0.1:{config.API_PORT}",
        node=config.NODE_NAME,
        k8s_version=config.K8S_VERSION,
        storage_classes={
            config.SC_DISK: "local-path-provisioner on a directory on disk",
            config.SC_TMPFS: "local-path-provisioner on a tmpfs directory",
            config.SC_NONE: "no provisioner: claims stay Pending",
        },
        default_storage_class=config.SC_DISK,
        provisioned_classes=(config.SC_DISK, config.SC_TMPFS),
        no_provisioner_class=config.SC_NONE,
        pg_image=config.PG_IMAGE,
        pg_uid=config.PG_UID,
        pg_gid=config.PG_GID,
        pg_bindir=config.PG_BINDIR,
        volume_dirs={config.SC_DISK: paths.disk_volumes, config.SC_TMPFS: paths.tmpfs_volumes},
        cgroup_v2=hoststate.cgroup_v2(),
        started_in_s=round(started_in_s, 1),
        cache_dir=paths.root,
    )


def _image_marker(tar: Path) -> str:
    st = tar.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def _import_images(paths: Paths) -> None:
    """Import the image tarballs into containerd, unless the kept store already has them."""
    markers = paths.run / "containerd" / "imported.json"
    try:
        done: dict[str, str] = json.loads(markers.read_text())
    except (OSError, ValueError):
        done = {}
    listed = _ctr(paths, "images", "ls", "-q").stdout.split()
    for tar, ref in (
        (paths.images / "pause.tar", config.PAUSE_IMAGE),
        (paths.images / "pgfio.tar", config.PG_IMAGE),
    ):
        if done.get(ref) == _image_marker(tar) and any(ref in name for name in listed):
            continue
        t0 = time.monotonic()
        proc = _ctr(paths, "images", "import", "--no-unpack=false", str(tar), timeout=300)
        if proc.returncode != 0:
            raise LabError(f"ctr images import {tar} failed: {proc.stderr.strip()}")
        done[ref] = _image_marker(tar)
        markers.write_text(json.dumps(done))
        log(f"image {ref} imported in {time.monotonic() - t0:.1f}s")


# --- down -----------------------------------------------------------------------------------------


def _our_processes(paths: Paths) -> list[tuple[str, int, int]]:
    """Processes of a lab in this cache dir, found by scanning /proc (for state-less cleanup):
    binaries from our bin/, and etcd, containerd or its shims whose command line names our
    run dir. Nothing else (a `tail -f` of a lab log is not the lab)."""
    found = []
    bin_dir, run_dir = str(paths.bin) + "/", str(paths.run) + "/"
    system_exes = {str(ETCD), str(CONTAINERD), str(SHIM)}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            exe = os.readlink(entry / "exe")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ours = exe.startswith(bin_dir) or (exe in system_exes and run_dir in cmdline + " ")
        if ours:
            start = proc_start_time(int(entry.name))
            if start is not None:
                found.append((Path(exe).name, int(entry.name), start))
    return found


def _pod_processes(state: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Processes in the kubepods cgroups our kubelet made (absent before `up`)."""
    if "kube_cgroups_before" not in state:
        return []
    before = set(state["kube_cgroups_before"])
    procs = []
    for top in hoststate.kube_cgroups():
        if top in before:
            continue
        for pid in hoststate.cgroup_pids(Path(top)):
            start = proc_start_time(pid)
            if start is not None:
                procs.append(("pod process", pid, start))
    return procs


def down(paths: Paths | None = None, keep_images: bool = True) -> None:
    """Stop everything and restore the host. Idempotent; never raises for a missing part."""
    paths = paths or Paths.default()
    t0 = time.monotonic()
    state = _load_state(paths)
    if state is None and not paths.run.exists() and not _our_processes(paths):
        log("down: nothing to do")
        return
    state = state or {"processes": [], "mounts": []}
    recorded = [(p["name"], p["pid"], p["start_time"]) for p in state["processes"]]

    def named(names: tuple[str, ...]) -> list[tuple[str, int, int]]:
        return [p for n in names for p in recorded if p[0] == n]

    stop_processes(named(STOP_ORDER))
    containers_clean = False
    if any(p[0] == "containerd" and is_same_process(p[1], p[2]) for p in recorded):
        containers_clean = _remove_containers(paths)
    # Container processes and shims: pods' cgroups, then shims started for our socket.
    stop_processes(_pod_processes(state), grace=2)
    stop_processes(
        [p for p in _our_processes(paths) if "shim" in p[0] or p[0] == "pod process"], grace=2
    )
    stop_processes(named(STOP_ORDER_LATE))
    leftovers = _our_processes(paths)
    if leftovers:
        log(f"killing unrecorded lab processes: {leftovers}")
        stop_processes(leftovers, grace=3)
    left_mounts = hoststate.unmount_all_under(paths.run)
    if left_mounts:
        log(f"WARNING: still mounted below {paths.run}: {left_mounts}")
    if "kube_cgroups_before" in state:  # without the record, whose kubepods would it be?
        before = set(state["kube_cgroups_before"])
        for top in hoststate.kube_cgroups():
            if top not in before and not hoststate.remove_cgroup_tree(Path(top)):
                log(f"WARNING: cgroup {top} could not be removed")
    if "iptables" in state:
        hoststate.restore_iptables(state["iptables"])
    if "sysctls" in state:
        hoststate.restore_sysctls(state["sysctls"])
    if "absent_paths" in state:
        hoststate.remove_created_paths(state["absent_paths"])
    # Keep the component logs of the last cluster; remove the rest of run/ (unless mounted).
    logs = paths.run / "logs"
    if logs.is_dir():
        last = paths.logs / "last-run"
        shutil.rmtree(last, ignore_errors=True)
        shutil.copytree(logs, last)
    if not left_mounts:
        _remove_run_dir(paths, keep_images and containers_clean)
    log(f"down: done in {time.monotonic() - t0:.1f}s")


def _remove_containers(paths: Paths) -> bool:
    """Kill and remove every container of our containerd; True if none is left."""
    tasks = _ctr(paths, "tasks", "ls", "-q").stdout.split()
    for task in tasks:
        _ctr(paths, "tasks", "kill", "--signal", "SIGKILL", task)
    deadline = time.monotonic() + 5
    for task in tasks:
        while time.monotonic() < deadline:
            if _ctr(paths, "tasks", "delete", task).returncode == 0:
                break
            time.sleep(0.2)
    for container in _ctr(paths, "containers", "ls", "-q").stdout.split():
        _ctr(paths, "containers", "delete", container)
    listed = _ctr(paths, "containers", "ls", "-q")
    return listed.returncode == 0 and not listed.stdout.split()


def _remove_run_dir(paths: Paths, keep_images: bool) -> None:
    """Remove run/, except containerd's content and snapshots when keeping images is safe
    (all containers were removed): the next `up` then skips the image import."""
    if not paths.run.exists():
        return
    keep = paths.run / "containerd"
    root = keep / "root"
    if keep_images and root.is_dir():
        for entry in paths.run.iterdir():
            if entry != keep:
                _rm(entry)
        for entry in keep.iterdir():
            if entry not in (root, keep / "imported.json"):
                _rm(entry)
        for name in ("io.containerd.grpc.v1.cri", "io.containerd.runtime.v2.task"):
            _rm(root / name)
    else:
        shutil.rmtree(paths.run, ignore_errors=True)


def _rm(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def prune(paths: Paths | None = None) -> None:
    """Free the disk that only a rebuild or a faster start needs; keeps bin/, images/, pki/."""
    paths = paths or Paths.default()
    if paths.go_root.exists():
        shutil.rmtree(paths.go_root)
        log(f"removed {paths.go_root}")
    if _load_state(paths) is None and not _our_processes(paths) and paths.run.exists():
        if hoststate.mount_points_under(paths.run):
            log(f"not removing {paths.run}: something is mounted below it (run `down`)")
        else:
            shutil.rmtree(paths.run)
            log(f"removed {paths.run}")


# --- status ---------------------------------------------------------------------------------------


def status(paths: Paths | None = None) -> dict[str, Any]:
    paths = paths or Paths.default()
    state = _load_state(paths) or {"processes": []}
    procs = {
        p["name"]: {"pid": p["pid"], "alive": is_same_process(p["pid"], p["start_time"])}
        for p in state["processes"]
    }
    api_ready = False
    if paths.kubectl.exists() and paths.admin_kubeconfig.exists() and procs:
        api_ready = (
            kubectl(paths, "get", "--raw", "/readyz", check=False, timeout=5).returncode == 0
        )

    def size(p: Path) -> int:
        if not p.exists():
            return 0
        out = run(["du", "-sb", p], check=False).stdout.split()
        return int(out[0]) if out else 0

    return {
        "cache_dir": str(paths.root),
        "built": build.is_built(paths),
        "running": any(p["alive"] for p in procs.values()),
        "api_ready": api_ready,
        "kubeconfig": str(paths.admin_kubeconfig),
        "processes": procs,
        "unrecorded_lab_processes": [
            {"name": n, "pid": pid}
            for n, pid, _ in _our_processes(paths)
            if pid not in {p["pid"] for p in procs.values()}
        ],
        "mounts": [str(m) for m in hoststate.mount_points_under(paths.run)],
        "disk_bytes": {
            "bin": size(paths.bin),
            "images": size(paths.images),
            "run": size(paths.run),
            "go_caches": size(paths.go_root),
        },
    }


# --- for test sessions ----------------------------------------------------------------------------

_HANDLED = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def lab(paths: Paths | None = None) -> Iterator[ClusterFacts]:
    """The cluster for the duration of a `with` block; torn down however the block ends.
    (A lab that is already running when the block starts is used and left running.)

    SIGTERM and SIGHUP raise KeyboardInterrupt, as SIGINT does, so the finally clause runs
    (and pytest stops the session); atexit covers an interpreter that exits some other way.
    A SIGKILL cannot be caught: the next up() finds the state file and cleans up first.
    """
    paths = paths or Paths.default()
    torn_down = False

    def teardown() -> None:
        nonlocal torn_down
        if torn_down:
            return
        torn_down = True
        # A second ^C or SIGTERM must not cut the teardown short.
        masked = {s: signal.signal(s, signal.SIG_IGN) for s in (*_HANDLED, signal.SIGINT)}
        try:
            down(paths)
        finally:
            for sig, handler in masked.items():
                signal.signal(sig, handler)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # What ^C does: pytest stops the session and runs every teardown.
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    running = running_facts(paths)
    if running is not None:
        log("the lab is already running (started by hand?): using it, leaving it up")
        yield running
        return
    previous = {sig: signal.signal(sig, on_signal) for sig in _HANDLED}
    atexit.register(teardown)
    try:
        yield up(paths, owner_pid=os.getpid())
    finally:
        try:
            teardown()
        finally:
            atexit.unregister(teardown)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
