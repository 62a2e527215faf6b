"""An API server that accepts connections and never answers (a hung apiserver, or a kubelet
behind it that stopped answering an exec) must fail howfast's calls within their limits, not
block a run for ever. The server here is a real loopback socket that reads and stays silent;
the client is the real Kubernetes client library."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from howfast.errors import HowfastError
from howfast.targets.k8s import clusterapi
from howfast.targets.k8s.cluster import Cluster


@pytest.fixture
def silent_server() -> Iterator[int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # read nothing, answer nothing

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join()
    listener.close()
    for conn in held:
        conn.close()


def kubeconfig(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: silent\n"
        f"clusters:\n- name: silent\n  cluster:\n    server: http://127.0.0.1:{port}\n"
        "contexts:\n- name: silent\n  context:\n    cluster: silent\n    user: nobody\n"
        "users:\n- name: nobody\n  user:\n    token: not-a-secret\n"
    )
    return path


def test_calls_to_a_silent_api_server_fail_within_their_limits(
    silent_server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path, silent_server)))
    monkeypatch.setattr(clusterapi, "REQUEST_TIMEOUT_S", (1.0, 1.5))
    monkeypatch.setattr(clusterapi, "WATCH_TIMEOUT_S", (1.0, 1.5))
    monkeypatch.setattr(clusterapi, "STREAM_OPEN_TIMEOUT_S", 2.0)
    cluster = Cluster()

    started = time.monotonic()
    with pytest.raises(HowfastError, match="cannot reach the API server"):
        cluster.server_version()
    assert time.monotonic() - started < 10

    started = time.monotonic()
    with pytest.raises(HowfastError, match="did not open the stream within 2 s"):
        cluster.exec_stream("default", "some-pod", "tools", ["true"])
    assert time.monotonic() - started < 10

    # a watch that never answers ends its chunk; the pod wait then reports its own time-out
    started = time.monotonic()
    with pytest.raises(HowfastError, match="was not ready after 4 s"):
        cluster.wait_pod_ready("default", "some-pod", [], timeout_s=4)
    assert time.monotonic() - started < 20
