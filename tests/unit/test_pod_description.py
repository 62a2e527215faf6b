"""PodHost works from a frozen description of a pod, which any Kubernetes-based target can
build: howfast's own target builds it from its manifests (before start) and from the pod and
node the cluster shows (after). The cluster's API is the one part left out here (the lab's
tests, tests/k8s, run it for real); the exec that stands in for it runs the real scripts
with /bin/sh on this machine."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from howfast.errors import HowfastError, UsageError
from howfast.hosts.base import Invocation
from howfast.hosts.pod import ExecResult, NodeFacts, PodDescription, PodHost
from howfast.machine.memory import MemoryBasis
from howfast.targets.k8s import facts
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s.spec import K8sOptions, parse_target
from howfast.targets.k8s.target import K8sPodTarget, K8sTarget, K8sVolumeTarget

GiB = 1 << 30


def target(server: bool = True, **options: Any) -> K8sPodTarget:
    """A Kubernetes target as the CLI makes it (a probe's without a server); nothing is
    contacted."""
    kind = K8sTarget if server else K8sVolumeTarget
    return kind(parse_target("k8s://fast"), K8sOptions(namespace="bench", **options))


def pod_manifest(t: K8sPodTarget) -> dict[str, Any]:
    (pod,) = [o for o in m.all_manifests(t.plan()) if o["kind"] == "Pod"]
    return pod


@pytest.mark.parametrize("server", [True, False])
@pytest.mark.parametrize("fio_image", [None, K8sOptions().image])
def test_the_planned_pod_is_the_pod_the_manifests_make(server: bool, fio_image: str | None) -> None:
    t = target(server, **({"fio_image": fio_image} if fio_image else {}))
    planned = t.planned_pod()
    pod = pod_manifest(t)
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    assert planned.pod == pod["metadata"]["name"] == f"howfast-{t.token}"
    assert planned.namespace == pod["metadata"]["namespace"] == "bench"
    assert planned.images == {name: c["image"] for name, c in containers.items()}
    assert planned.tools_container in containers
    assert planned.server_container == ("postgres" if server else None)
    separate = fio_image is None  # fio's own image by default
    assert planned.program_containers == ({"fio": "fio"} if separate else {})
    assert set(planned.program_containers.values()) <= set(containers)
    mounts = {v["mountPath"] for v in containers[planned.tools_container]["volumeMounts"]}
    assert planned.work_dir in mounts
    assert any(p.startswith(planned.volume_root + "/") for p in mounts - {planned.work_dir})
    assert planned.node == NodeFacts()


POD_OBJECT = {
    "metadata": {"name": "howfast-ab12", "namespace": "bench"},
    "spec": {
        "nodeName": "node-2",
        "containers": [
            {"name": "postgres", "image": "postgres:17@sha256:1"},
            {"name": "tools", "image": "postgres:17@sha256:1"},
        ],
    },
}
NODE_OBJECT = {
    "metadata": {"name": "node-2"},
    "status": {"allocatable": {"cpu": "3500m", "memory": "8Gi"}},
}


def test_a_pod_is_described_from_the_cluster_s_objects() -> None:
    planned = target().planned_pod()
    found = facts.pod_description(POD_OBJECT, NODE_OBJECT, planned=planned)
    assert found.pod == "howfast-ab12"
    assert found.images == {"postgres": "postgres:17@sha256:1", "tools": "postgres:17@sha256:1"}
    assert found.node == NodeFacts("node-2", 3, 8 * GiB)
    assert (found.tools_container, found.server_container, found.work_dir) == (
        planned.tools_container,
        planned.server_container,
        planned.work_dir,
    )
    unscheduled = facts.pod_description(POD_OBJECT, None, planned=planned)
    assert unscheduled.node == NodeFacts()
    assert facts.node_description({"metadata": {"name": "n"}, "status": {}}) == NodeFacts("n")


class ShellHere:
    """Runs what PodHost would exec in a container with /bin/sh here, and says which
    container each exec was meant for."""

    def __init__(self) -> None:
        self.containers: list[str] = []

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult:
        self.containers.append(container)
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        return ExecResult(done.returncode, done.stdout, done.stderr)

    def exec_stream(self, namespace: str, pod: str, container: str, command: list[str]) -> Any:
        self.containers.append(container)
        return Finished(subprocess.run(command, capture_output=True, text=True, timeout=60))


class Finished:
    """An exec session whose command has ended, as the client's WSClient reads then."""

    def __init__(self, done: subprocess.CompletedProcess[str]) -> None:
        self.out, self.err, self.returncode = done.stdout, done.stderr, done.returncode

    def is_open(self) -> bool:
        return False

    def read_stdout(self) -> str:
        out, self.out = self.out, ""
        return out

    def read_stderr(self) -> str:
        err, self.err = self.err, ""
        return err

    def close(self) -> None: ...


def described(tmp_path: Path, **changes: Any) -> PodDescription:
    """The planned pod, with its work volume under tmp_path (the scripts run here)."""
    planned = target().planned_pod()
    return replace(planned, work_dir=str(tmp_path / "work"), **changes)


def test_tools_run_in_the_container_the_description_names(tmp_path: Path) -> None:
    shell = ShellHere()
    host = PodHost(described(tmp_path, program_containers={"fio": "fio"}), shell)
    work = tmp_path / "here" / "run" / "step-1"
    work.mkdir(parents=True)
    made = Invocation(("sh", "-c", "cat in.txt > out.txt; echo said"), inputs={"in.txt": "x"},
                      outputs=("out.txt",))  # fmt: skip
    result = host.run(made, work)
    assert (result.returncode, result.stdout) == (0, "said\n")
    assert result.files["out.txt"].read_text() == "x"
    assert set(shell.containers) == {"tools"}
    shell.containers.clear()
    host.run(Invocation(("fio", "--version")), work)
    assert set(shell.containers) == {"fio"}
    assert not (tmp_path / "work" / "here" / "run" / "step-1").exists()  # removed after


def test_a_pod_host_answers_from_its_description(tmp_path: Path) -> None:
    node = NodeFacts("node-2", 8, 16 * GiB)
    host = PodHost(described(tmp_path, node=node), ShellHere())
    assert host.cores() == 8
    assert host.server_memory(None) == MemoryBasis(16 * GiB, "ram")
    capped = PodHost(described(tmp_path, node=node, memory_limit_bytes=2 * GiB), ShellHere())
    assert capped.server_memory(None) == MemoryBasis(2 * GiB, "--memory")
    assert (
        PodHost(described(tmp_path, server_container=None), ShellHere()).server_counters() is None
    )
    assert host.server_counters() is not None


def test_a_target_not_started_gives_the_planned_pod_and_refuses_execs() -> None:
    t = target(memory_bytes=None)
    host = t.host()
    assert isinstance(host, PodHost) and host.pod == t.planned_pod()
    assert host.cores() == 1  # the node is not known before the pod is scheduled
    unknown = host.server_memory(None)
    assert isinstance(unknown, str) and "give --memory SIZE" in unknown
    assert target(memory_bytes=GiB).host().server_memory(None) == MemoryBasis(GiB, "--memory")
    with pytest.raises(HowfastError, match="the pod is not running"):
        host.fstype(Path(m.DATA_MOUNT))


# A pod howfast did not create: an operator's PostgreSQL, its data on a claim mounted at
# /var/lib/postgresql/data, PGDATA a directory below, a memory limit, and a sidecar.
FOREIGN_POD = {
    "metadata": {"name": "db-1", "namespace": "prod"},
    "spec": {
        "nodeName": "node-2",
        "containers": [
            {
                "name": "postgres",
                "image": "ghcr.io/example/postgresql:16",
                "env": [{"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"}],
                "resources": {"limits": {"memory": "2Gi", "cpu": "1"}},
                "volumeMounts": [
                    {"name": "pgdata", "mountPath": "/var/lib/postgresql/data"},
                    {"name": "shm", "mountPath": "/dev/shm"},
                ],
            },
            {"name": "exporter", "image": "example/exporter:1"},
        ],
    },
}


def test_a_pod_howfast_did_not_create_is_described_from_its_objects(tmp_path: Path) -> None:
    found = facts.existing_pod_description(
        FOREIGN_POD, NODE_OBJECT, context="prod-cluster", server_container="postgres"
    )
    assert (found.context, found.namespace, found.pod) == ("prod-cluster", "prod", "db-1")
    assert found.tools_container == found.server_container == "postgres"
    assert found.data_dir == "/var/lib/postgresql/data/pgdata"
    assert found.volume_root == "/var/lib/postgresql"
    assert found.memory_limit_bytes == 2 * GiB
    assert found.images == {"postgres": "ghcr.io/example/postgresql:16",
                            "exporter": "example/exporter:1"}  # fmt: skip
    assert found.node == NodeFacts("node-2", 3, 8 * GiB) and found.program_containers == {}
    # The PodHost it makes runs tools in that container and answers from the pod's facts.
    shell = ShellHere()
    host = PodHost(replace(found, work_dir=str(tmp_path / "work")), shell)
    assert host.server_memory(None) == MemoryBasis(2 * GiB, "--memory")
    assert host.cores() == 3 and host.server_counters() is not None
    work = tmp_path / "here" / "run" / "step-1"
    work.mkdir(parents=True)
    assert host.run(Invocation(("echo", "hi")), work).stdout == "hi\n"
    assert set(shell.containers) == {"postgres"}
    bare = {"metadata": {"name": "db-2"}, "spec": {"containers": [{"name": "pg", "image": "p"}]}}
    plain = facts.existing_pod_description(bare, None, context=None, server_container="pg")
    assert (plain.namespace, plain.data_dir, plain.volume_root) == (
        "default",
        facts.DEFAULT_PGDATA,
        "",
    )
    assert plain.memory_limit_bytes is None and plain.node == NodeFacts()
    with pytest.raises(UsageError, match="pod db-1 has no container 'pg' \\(it has postgres, "):
        facts.existing_pod_description(FOREIGN_POD, None, context=None, server_container="pg")


class FakeCluster:
    """Stands in for the Kubernetes API (no cluster here; the lab's tests run a real one):
    the reads a record makes, and execs answered by /bin/sh on this machine, as `stat -f`
    in the pod would answer for its volumes."""

    def __init__(self) -> None:
        self.execs: list[list[str]] = []

    def server_version(self) -> str:
        return "v1.30.0"

    def read(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return {"Pod": POD_OBJECT, "Node": NODE_OBJECT}.get(kind)

    def storage_class(self, name: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "provisioner": "lab"}

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult:
        self.execs.append(command)
        if command[:2] == ["/bin/sh", "-c"] and command[2].startswith("stat -f -c %T"):
            return ExecResult(0, "ext2/ext3\n", "")
        return ExecResult(1, "", "not here")

    def exec_shell(self, namespace: str, pod: str, container: str) -> AnsweringShell:
        return AnsweringShell(lambda argv: self.exec(namespace, pod, container, argv, timeout_s=1))


class AnsweringShell:
    """A long-lived shell session (hosts/podshell.py) whose commands `answer` answers as
    the fake's execs: each command's argv is read back from the text the shell is sent."""

    def __init__(self, answer: Callable[[list[str]], ExecResult]) -> None:
        self.answer = answer
        self.out = self.err = ""

    def write_stdin(self, data: str) -> None:
        words = shlex.split(data)  # /bin/sh -c SCRIPT </dev/null; printf FORMAT MARKER ...
        script, marker = words[2], words[6]
        done = self.answer(shlex.split(script))
        self.out += f"{done.stdout}\n{marker} {done.returncode}\n"
        self.err += f"{done.stderr}\n{marker}\n"

    def is_open(self) -> bool:
        return True

    def update(self, timeout: float = 0) -> None: ...

    def peek_stdout(self, timeout: float = 0) -> str:
        return self.out

    def read_stdout(self, timeout: float | None = None) -> str:
        out, self.out = self.out, ""
        return out

    def peek_stderr(self, timeout: float = 0) -> str:
        return self.err

    def read_stderr(self, timeout: float | None = None) -> str:
        err, self.err = self.err, ""
        return err

    def close(self) -> None: ...


def test_a_running_pod_s_record_names_its_volumes_file_systems() -> None:
    """Whether or not a host was asked for first: a fleet member, whose record is made
    before anyone asks for its host, had none before (the quirk phase B fixes)."""
    t = target()
    t.cluster, t.pod, t.node = FakeCluster(), POD_OBJECT, NODE_OBJECT  # as start() leaves them
    t._started = True
    device = t.record().device
    assert device["data"]["fstype"] == "ext2/ext3"
    assert device["wal"]["fstype"] == "ext2/ext3"  # the data volume's: no ?wal= class
    assert device["kubernetes"]["node"]["name"] == "node-2"
    t._started = False  # nothing to delete: the fake made nothing
