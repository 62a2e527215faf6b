"""The Kubernetes API client howfast talks through (the base of Cluster, cluster.py):
kubeconfig resolution, every REST call bounded in time, watches, the API's errors turned into
messages. The limits are read from this module when used (the silent-server test sets them).

Objects go in and come out as plain dicts (camelCase, as in YAML: the API's own JSON), over
the paths of restpaths.py, so that the pure builders and readers (manifests.py, facts.py)
never see the client's classes.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from howfast.errors import Aborted, HowfastError, UsageError

WATCH_CHUNK_S = 5  # a watch is re-opened this often, to look at the cancel token and deadline
# Client-side limits, so that an API server (or a kubelet behind it) that stops answering
# fails a call with a message instead of blocking howfast for ever: (connect, read) seconds.
REQUEST_TIMEOUT_S = (10.0, 60.0)
# the server ends a watch chunk first; a watch silent for longer is given up and read again
WATCH_TIMEOUT_S = (10.0, WATCH_CHUNK_S + 10.0)
STREAM_OPEN_TIMEOUT_S = 60.0  # an exec's or port-forward's websocket handshake


def _kubernetes() -> Any:
    try:
        import kubernetes
    except ImportError as exc:  # pragma: no cover - a dependency
        raise HowfastError(f"the kubernetes client library is missing: {exc}") from None
    return kubernetes


def _kubeconfig() -> str | None:
    """KUBECONFIG as it is now (the client library reads it once, when it is imported);
    None: the library's default, ~/.kube/config."""
    return os.environ.get("KUBECONFIG") or None


def kubeconfig_namespace(context: str | None) -> str | None:
    """The namespace of the kubeconfig context (KUBECONFIG, ~/.kube/config), without any
    network access; None when there is no kubeconfig or the context names none."""
    k8s = _kubernetes()
    try:
        contexts, active = k8s.config.list_kube_config_contexts(config_file=_kubeconfig())
    except Exception:  # no kubeconfig, or one that cannot be read: the caller decides
        return None
    chosen = active
    if context is not None:
        chosen = next((c for c in contexts or [] if c.get("name") == context), None)
    if not chosen:
        return None
    namespace = (chosen.get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


class ClusterApi:
    """One API client for one kubeconfig context, and how a call is made through it: JSON
    over the REST paths of restpaths.py, with the client library's configuration, auth and
    connection pool (not its generated API classes: see restpaths.py)."""

    def __init__(self, context: str | None = None) -> None:
        k8s = _kubernetes()
        try:
            self.api_client = k8s.config.new_client_from_config(
                config_file=_kubeconfig(), context=context
            )
        except Exception as exc:
            try:  # inside a pod: its service account
                k8s.config.load_incluster_config()
                self.api_client = k8s.client.ApiClient()
            except Exception:
                raise UsageError(
                    f"cannot load a kubeconfig{f' context {context!r}' if context else ''}: {exc}",
                    "set KUBECONFIG or write ~/.kube/config; choose a context with --kube-context",
                ) from None
        self.k8s = k8s
        self.context = context
        self.host = str(self.api_client.configuration.host)

    # -- requests -------------------------------------------------------------------------
    def serialize(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        body: Any = None,
    ) -> tuple[str, dict[str, str], Any]:
        """The URL (its query: a list value repeats its key), the headers with this user's
        credentials (a token an exec plugin refreshes, too), and the body."""
        pairs = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        lists = {k: "multi" for k, v in pairs if isinstance(v, list)}
        _, url, headers, body, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=pairs,
            header_params=headers or {},
            body=body,
            auth_settings=["BearerToken"],
            collection_formats=lists,
        )
        return str(url), dict(headers), body

    def open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: tuple[float, float] | None = None,
    ) -> Any:
        """One request, its response not read yet (the client's RESTResponse). An HTTP error
        status raises the client's ApiException (with its status and body); a server that
        does not answer, urllib3's error. Bounded: REQUEST_TIMEOUT_S unless `timeout`."""
        headers = {"Accept": "application/json, */*"}
        if body is not None:
            headers["Content-Type"] = content_type
        url, headers, body = self.serialize(method, path, query, headers, body)
        response = self.api_client.call_api(
            method, url, header_params=headers, body=body,
            _request_timeout=timeout or REQUEST_TIMEOUT_S,
        )  # fmt: skip
        if not 200 <= response.status <= 299:
            response.read()
            raise self.k8s.client.exceptions.ApiException(http_resp=response)
        return response

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        """One request, its answer: the decoded JSON, or the text when it is not JSON (a
        container's log)."""
        response = self.open(method, path, query=query, body=body, content_type=content_type)
        text = (response.read() or b"").decode("utf-8", errors="replace")
        if "json" in str(response.headers.get("content-type") or ""):
            return json.loads(text) if text else {}
        return text

    def get(self, path: str, **query: Any) -> Any:
        return self.send("GET", path, query=query)

    def request(self, doing: str, method: str, path: str, **kwargs: Any) -> Any:
        """send(), its failure a HowfastError that says what was being done."""
        return self.call(doing, self.send, method, path, **kwargs)

    def items(self, doing: str, path: str, **query: Any) -> list[dict[str, Any]]:
        """The items of a collection (its path, with selectors as `query`)."""
        found = self.call(doing, self.get, path, **query)
        return list(found.get("items") or [])

    def watch(
        self, path: str, timeout_s: float, request_timeout: tuple[float, float], **query: Any
    ) -> Iterator[dict[str, Any]]:
        """A watch of a collection: its events ({"type", "object"}) as they come, for up to
        `timeout_s` (the server ends it). An ERROR event (an expired resource version)
        raises ApiException with its code, as the client's own Watch does."""
        query = {**query, "watch": True, "timeoutSeconds": max(1, int(timeout_s))}
        response = self.open("GET", path, query=query, timeout=request_timeout).response
        try:
            pending = b""
            for chunk in response.stream(amt=None, decode_content=False):
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield self._event(line)
            if pending.strip():
                yield self._event(pending)
        finally:  # closed, not just released: a watch left early may still be sending
            response.close()
            response.release_conn()

    def _event(self, line: bytes) -> dict[str, Any]:
        event = json.loads(line)
        if event.get("type") == "ERROR":
            status = event.get("object") or {}
            raise self.k8s.client.exceptions.ApiException(
                status=status.get("code"), reason=status.get("message")
            )
        return dict(event)

    # -- errors ---------------------------------------------------------------------------
    def _error(self, exc: Exception, doing: str) -> HowfastError:
        status = getattr(exc, "status", None)
        body = getattr(exc, "body", None) or ""
        message = str(exc)
        with contextlib.suppress(Exception):
            message = json.loads(body).get("message") or message
        if status == 403:
            return HowfastError(
                f"{doing}: forbidden: {message}",
                "the Role in deploy/k8s/role.yaml lists what howfast needs in the namespace",
            )
        if status is None:
            return HowfastError(f"{doing}: cannot reach the API server {self.host}: {message}")
        return HowfastError(f"{doing}: {message}")

    def call(self, doing: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self.k8s.client.exceptions.ApiException as exc:
            raise self._error(exc, doing) from None
        except Exception as exc:  # urllib3's connection errors
            if isinstance(exc, HowfastError | Aborted):
                raise
            raise HowfastError(f"{doing}: cannot reach the API server {self.host}: {exc}") from None


def _query_value(value: Any) -> Any:
    """The API's spelling: true/false for booleans, text for numbers, lists kept."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return str(value)


def _open_within(doing: str, connect: Callable[[], Any]) -> Any:
    """`connect()` (a websocket handshake, which the client makes without a time-out) in a
    thread of its own, given STREAM_OPEN_TIMEOUT_S; a session that opens after we gave up
    is closed."""
    lock = threading.Lock()
    outcome: dict[str, Any] = {}
    opened = threading.Event()

    def attempt() -> None:
        try:
            session = connect()
        except BaseException as exc:  # handed to the caller
            with lock:
                outcome["error"] = exc
            opened.set()
            return
        with lock:
            if outcome.get("abandoned"):
                with contextlib.suppress(Exception):
                    session.close()
                return
            outcome["session"] = session
        opened.set()

    threading.Thread(target=attempt, daemon=True, name="howfast-stream-open").start()
    opened.wait(STREAM_OPEN_TIMEOUT_S)
    with lock:
        if "error" in outcome:
            raise outcome["error"]
        if "session" in outcome:
            return outcome["session"]
        outcome["abandoned"] = True
    raise HowfastError(
        f"{doing}: the API server did not open the stream within {STREAM_OPEN_TIMEOUT_S:g} s"
    )


def _events(stream: Iterator[dict[str, Any]], k8s: Any) -> Iterator[dict[str, Any]]:
    """A watch's events; a watch the server ends with an error (an expired or too new
    resource version, a time-out) or that stops answering just ends: the caller lists and
    watches again, within its own deadline."""
    import urllib3

    try:
        yield from stream
    except k8s.client.exceptions.ApiException as exc:
        if exc.status not in (410, 504, 500):
            raise
        time.sleep(0.5)
    except urllib3.exceptions.HTTPError as exc:
        # urllib3 gives up on a silent server with MaxRetryError(reason=ReadTimeoutError)
        reason = getattr(exc, "reason", None) or exc
        if not isinstance(
            reason, urllib3.exceptions.ReadTimeoutError | urllib3.exceptions.ProtocolError
        ):
            raise
        time.sleep(0.5)
