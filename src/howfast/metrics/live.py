"""`howfast run --metrics-port PORT`: a RunObserver that keeps the run's metric families up to
date from the runner's events, and an HTTP server that serves them on /metrics while the run
lasts (127.0.0.1 unless --metrics-address says otherwise)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from howfast.errors import UsageError
from howfast.metrics.families import RunMetrics, StepLabels, step_labels
from howfast.model import StepRecord
from howfast.observer import StepRef

DEFAULT_ADDRESS = "127.0.0.1"
LINGER_S = 15.0  # at most this long after the run for one last scrape, when someone scrapes


class ScrapeClock(Collector):
    """Exposes nothing; remembers when /metrics was last read."""

    def __init__(self) -> None:
        self.last: float | None = None
        self.scraped = threading.Event()

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        self.last = time.time()
        self.scraped.set()
        return []


class MetricsServer:
    """prometheus_client's HTTP server on the run's own registry."""

    def __init__(self, metrics: RunMetrics, port: int, address: str = DEFAULT_ADDRESS) -> None:
        self.clock = ScrapeClock()
        metrics.registry.register(self.clock)
        try:
            self.httpd, self.thread = start_http_server(port, address, metrics.registry)
        except OSError as exc:
            raise UsageError(f"--metrics-port {port}: cannot listen on {address}: {exc}") from None
        self.address = address

    @property
    def port(self) -> int:
        return int(self.httpd.server_port)

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}/metrics"

    def wait_for_scrape(self, after: float, timeout_s: float) -> bool:
        """Wait (at most timeout_s) for a scrape that began after `after` (epoch seconds);
        only when something has scraped before: nobody may be listening."""
        if self.clock.last is None:
            return False
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.clock.last is not None and self.clock.last > after:
                return True
            self.clock.scraped.clear()
            self.clock.scraped.wait(min(0.2, max(0.0, deadline - time.monotonic())))
        return False

    def stop(self) -> None:
        server: WSGIServer = self.httpd
        server.shutdown()
        server.server_close()
        self.thread.join(5)


class MetricsObserver:
    """Feeds RunMetrics from the runner's events; serves them when given a server."""

    def __init__(self, plan: str, metrics: RunMetrics | None = None) -> None:
        self.plan = plan
        self.metrics = metrics or RunMetrics()
        self.run_id = ""
        self.total = 0
        self.finished = 0
        self.counted: dict[int, tuple[float, float]] = {}  # step index -> (tx, failures)
        self.server: MetricsServer | None = None

    def serve(self, port: int, address: str | None = None) -> MetricsServer:
        self.server = MetricsServer(self.metrics, port, address or DEFAULT_ADDRESS)
        return self.server

    def _labels(self, step: StepRef) -> StepLabels:
        return step_labels(
            self.run_id, self.plan, step.target, step.workload, step.params, step.index
        )

    def run_started(self, run_id: int, steps: int, targets: int) -> None:
        self.run_id = str(run_id)
        self.total = steps
        self.metrics.run_started(self.run_id, self.plan, steps, time.time())

    def step_started(self, step: StepRef, expected_s: float | None) -> None:
        self.counted[step.index] = (0.0, 0.0)
        self.metrics.step_started(self._labels(step), expected_s)

    def step_progress(self, step: StepRef, t: float, values: dict[str, float]) -> None:
        tx = self.metrics.step_progress(self._labels(step), t, values)
        before_tx, before_failed = self.counted.get(step.index, (0.0, 0.0))
        failed = values.get("failed") or 0.0
        self.counted[step.index] = (before_tx + tx, before_failed + max(0.0, failed))

    def step_finished(self, step: StepRef, record: StepRecord) -> None:
        tx, failed = self.counted.pop(step.index, (0.0, 0.0))
        labels = self._labels(step)
        self.metrics.step_finished(labels, record, counted_transactions=tx, counted_failures=failed)
        self.finished += 1
        self.metrics.run_steps_finished.labels(self.run_id, self.plan, record.status).inc()
        if self.total:
            self.metrics.run_progress.labels(self.run_id, self.plan).set(self.finished / self.total)

    def message(self, text: str) -> None:
        pass

    def close(self, *, linger_s: float = 0.0) -> None:
        """The run is over: record its end; with linger_s, give a scraper that is watching
        one last chance to read the final figures; then stop serving."""
        ended = time.time()
        if self.run_id:
            self.metrics.run_finished(self.run_id, self.plan, ended)
        if self.server is None:
            return
        try:
            if linger_s > 0:
                self.server.wait_for_scrape(ended, linger_s)
        finally:
            self.server.stop()
            self.server = None
