"""`run --metrics-port`: start the live exporter before the run, say where it serves."""

from __future__ import annotations

from howfast.cli.context import CliEnv
from howfast.metrics.live import MetricsObserver


def live_metrics(
    env: CliEnv, plan: str, port: int | None, address: str | None
) -> MetricsObserver | None:
    """The metrics observer, already serving; None without --metrics-port."""
    if port is None:
        return None
    observer = MetricsObserver(plan)
    server = observer.serve(port, address)
    env.info(f"serving Prometheus metrics on {server.url} while the run lasts")
    return observer
