"""The exec a pod target hands its hosts: commands and the tools run in long-lived shells
(hosts/podshell.py), refused while the pod is not running."""

from __future__ import annotations

from typing import Any, Protocol

from howfast.hosts.pod import ExecResult
from howfast.hosts.podshell import PodShells
from howfast.targets.k8s.cluster import Cluster


class ExecPlace(Protocol):
    """A target that says where its pod runs, or refuses while it does not."""

    def exec_place(self) -> tuple[Cluster, str, str]: ...


class RunningPod:
    """The cluster's exec for a target's pods, refused while the pod is not running (before
    start, after stop), as the target's own execs are (exec_place). Commands and the tools
    run in long-lived shells (hosts/podshell.py), which stop() closes."""

    def __init__(self, target: ExecPlace) -> None:
        self.target = target
        self.shells = PodShells(self._open_shell)

    def _open_shell(self, namespace: str, pod: str, container: str) -> Any:
        cluster, _, _ = self.target.exec_place()
        return cluster.exec_shell(namespace, pod, container)

    def exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, timeout_s: float
    ) -> ExecResult:
        self.target.exec_place()
        return self.shells.exec(namespace, pod, container, command, timeout_s=timeout_s)

    def exec_stream(self, namespace: str, pod: str, container: str, command: list[str]) -> Any:
        self.target.exec_place()
        return self.shells.stream(namespace, pod, container, command)
