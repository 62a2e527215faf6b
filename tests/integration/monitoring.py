"""Real Prometheus and node_exporter for tests: Debian's binaries, started by the test with
their own configuration on free loopback ports (never the system services), data in a
temporary directory, stopped by PID afterwards."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import free_port

PROMETHEUS = "/usr/bin/prometheus"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
LOOPBACK = "127.0.0.1"


def missing() -> str | None:
    for path in (PROMETHEUS, NODE_EXPORTER):
        if shutil.which(path) is None:
            return f"{path} is not installed (scripts/setup.sh test installs it)"
    return None


def _get(url: str, timeout: float = 10) -> str:
    assert urllib.parse.urlsplit(url).hostname == LOOPBACK  # tests only talk to loopback
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return str(r.read().decode())


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError):
            _get(url, timeout=2)
            return
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready in {timeout} s: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@dataclass
class Monitoring:
    prometheus_url: str
    node_port: int
    howfast_port: int
    textfile_dir: Path

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at else {})}
        doc = json.loads(
            _get(f"{self.prometheus_url}/api/v1/query?{urllib.parse.urlencode(params)}")
        )
        assert doc["status"] == "success", doc
        return list(doc["data"]["result"])

    def query_range(self, expr: str, start: float, end: float, step: float = 1) -> list[dict]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)}
        url = f"{self.prometheus_url}/api/v1/query_range?{urllib.parse.urlencode(params)}"
        doc = json.loads(_get(url))
        assert doc["status"] == "success", doc
        return list(doc["data"]["result"])

    def wait_for(self, expr: str, timeout: float = 30) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            found = self.query(expr)
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.5)


@contextlib.contextmanager
def monitoring(work: Path, scrape_interval: str = "1s") -> Iterator[Monitoring]:
    """node_exporter (disk, CPU and textfile collectors) and Prometheus scraping it and
    howfast's future --metrics-port every second."""
    node_port, prom_port, howfast_port = (free_port(LOOPBACK) for _ in range(3))
    textfiles = work / "textfile"
    textfiles.mkdir()
    config = work / "prometheus.yml"
    config.write_text(
        f"""global:
  scrape_interval: {scrape_interval}
  evaluation_interval: {scrape_interval}
scrape_configs:
  - job_name: node
    static_configs: [{{targets: ["{LOOPBACK}:{node_port}"]}}]
  - job_name: howfast
    static_configs: [{{targets: ["{LOOPBACK}:{howfast_port}"]}}]
"""
    )
    node_log, prom_log = work / "node_exporter.log", work / "prometheus.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with node_log.open("wb") as log:
            node = subprocess.Popen(
                [
                    NODE_EXPORTER,
                    f"--web.listen-address={LOOPBACK}:{node_port}",
                    "--collector.disable-defaults",
                    "--collector.diskstats",
                    "--collector.cpu",
                    "--collector.textfile",
                    f"--collector.textfile.directory={textfiles}",
                    # Loop devices too (the default leaves them out): a target may be on one.
                    r"--collector.diskstats.device-exclude=^(ram|zram)\d+$",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        procs.append(node)
        _wait_http(f"http://{LOOPBACK}:{node_port}/metrics", node, node_log)
        with prom_log.open("wb") as log:
            prom = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={work / 'tsdb'}",
                    f"--web.listen-address={LOOPBACK}:{prom_port}",
                    "--storage.tsdb.retention.time=1h",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=work,
            )
        procs.append(prom)
        url = f"http://{LOOPBACK}:{prom_port}"
        _wait_http(f"{url}/-/ready", prom, prom_log)
        yield Monitoring(url, node_port, howfast_port, textfiles)
    finally:
        for proc in reversed(procs):
            _stop(proc)
