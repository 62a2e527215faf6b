"""Cluster's streams into a pod: exec (a short command, a long-lived shell) and a
port-forward for the SQL howfast itself sends (statistics views, ALTER SYSTEM). The tools
never go through the port-forward: they run in the pod (hosts/pod.py)."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from howfast.errors import HowfastError
from howfast.hosts.pod import ExecResult
from howfast.targets.k8s import restpaths as rp
from howfast.targets.k8s.clusterapi import ClusterApi, _open_within
from howfast.targets.local_server import free_port


class ClusterStreams(ClusterApi):
    """Exec and port-forward sessions (the client's WSClient and PortForward), opened on
    their websocket URLs directly (restpaths.py says why not through the API classes)."""

    def _websocket(self, path: str, query: dict[str, Any]) -> tuple[Any, str, dict[str, str]]:
        """The client's configuration, the URL (its query included) and the headers with
        this user's credentials, for a websocket to `path`."""
        url, headers, _ = self.serialize("GET", path, query)
        return self.api_client.configuration, url, headers

    def exec_stream(self, namespace: str, pod: str, container: str, command: list[str]) -> Any:
        """An exec session (the client's WSClient), not yet read."""
        return self._exec(namespace, pod, container, command, stdin=False)

    def exec_shell(self, namespace: str, pod: str, container: str) -> Any:
        """A long-lived /bin/sh in the container, reading commands on its stdin (the
        client's WSClient; hosts/podshell.py writes and reads it)."""
        return self._exec(namespace, pod, container, ["/bin/sh"], stdin=True)

    def _exec(
        self, namespace: str, pod: str, container: str, command: list[str], *, stdin: bool
    ) -> Any:
        from kubernetes.stream import ws_client

        query = {
            "container": container, "command": command, "stdin": stdin,
            "stdout": True, "stderr": True, "tty": False,
        }  # fmt: skip
        configuration, url, headers = self._websocket(rp.path("Pod", namespace, pod, "exec"), query)
        doing = f"exec in pod {pod}"
        return _open_within(
            doing,
            lambda: self.call(
                doing,
                ws_client.websocket_call,
                configuration,
                "GET",
                url,
                headers=headers,
                _preload_content=False,
            ),
        )

    def port_forward(self, namespace: str, pod: str, port: int) -> Any:
        """A port-forward session to one port of the pod (the client's PortForward)."""
        from kubernetes.stream import ws_client

        path = rp.path("Pod", namespace, pod, "portforward")
        configuration, url, headers = self._websocket(path, {"ports": port})
        doing = f"port-forward to pod {pod}"
        return _open_within(
            doing,
            lambda: self.call(
                doing, ws_client.portforward_call, configuration, "GET", url, headers=headers
            ),
        )

    def exec(
        self,
        namespace: str,
        pod: str,
        container: str,
        command: list[str],
        *,
        timeout_s: float = 60.0,
    ) -> ExecResult:
        """Run a short command in a container; its whole output."""
        session = self.exec_stream(namespace, pod, container, command)
        out: list[str] = []
        err: list[str] = []
        try:
            deadline = time.monotonic() + timeout_s
            while session.is_open():
                session.update(timeout=1)
                if session.peek_stdout():
                    out.append(session.read_stdout())
                if session.peek_stderr():
                    err.append(session.read_stderr())
                if time.monotonic() > deadline:
                    raise HowfastError(
                        f"{' '.join(command[:3])} in pod {pod}: no answer in {timeout_s:g} s"
                    )
            out.append(session.read_stdout() or "")
            err.append(session.read_stderr() or "")
            code = session.returncode
        finally:
            session.close()
        return ExecResult(int(code if code is not None else -1), "".join(out), "".join(err))


class PortForward:
    """127.0.0.1:PORT here, forwarded to 127.0.0.1:PORT in the pod through the API server
    (each connection its own port-forward stream), or to `remote_port` there (a server
    howfast did not start: a CloudNativePG instance's 5432). `pod` may be a function that
    names the pod as each connection opens (an operator's current primary). Only for
    howfast's own SQL."""

    def __init__(
        self,
        cluster: ClusterStreams,
        namespace: str,
        pod: str | Callable[[], str],
        listener: socket.socket,
        remote_port: int | None = None,
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.pod = pod
        self.listener = listener
        self.port = int(listener.getsockname()[1])
        self.remote_port = remote_port or self.port
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="howfast-pf")

    @staticmethod
    def reserve() -> socket.socket:
        """A listening socket on a free loopback port: the port PostgreSQL will use too."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        return listener

    @staticmethod
    def free_port() -> int:
        """A loopback port free now (host mode: a server's port on this machine; the lab's
        nodes are this machine). Another process may take it before the server binds it:
        that server then fails to start, and its log says why."""
        return free_port()

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self.listener.close()

    def _accept(self) -> None:
        self.listener.settimeout(0.5)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            pod = self.pod() if callable(self.pod) else self.pod
            forward = self.cluster.port_forward(self.namespace, pod, self.remote_port)
            remote = forward.socket(self.remote_port)
            remote.setblocking(True)
        except Exception:
            client.close()
            return
        try:
            _pump(client, remote, self._stop)
        finally:
            for s in (client, remote):
                with contextlib.suppress(OSError):
                    s.close()
            with contextlib.suppress(Exception):
                forward.close()


def _pump(a: socket.socket, b: socket.socket, stop: threading.Event) -> None:
    """Bytes both ways until either end closes or fails: a failed send (the other end gone,
    as a pod deleted under a forwarded connection) ends it as a failed receive does."""
    peers = {a: b, b: a}
    while not stop.is_set():
        readable, _, _ = select.select(list(peers), [], [], 0.5)
        for sock in readable:
            try:
                data = sock.recv(65536)
                if not data:
                    return
                peers[sock].sendall(data)
            except OSError:
                return


@contextlib.contextmanager
def forwarded(
    cluster: ClusterStreams, namespace: str, pod: str, listener: socket.socket
) -> Iterator[PortForward]:
    forward = PortForward(cluster, namespace, pod, listener)
    forward.start()
    try:
        yield forward
    finally:
        forward.close()
