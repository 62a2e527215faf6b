"""`howfast run --prometheus URL`: after each sampled step, read what the cluster's monitoring
collected during the step's time window from Prometheus's HTTP API, and store it beside the
local samplers' figures:

- node_exporter's disk counters (`node_disk_*`) of the device behind each role (the device
  names howfast resolved: locally, the same ones the diskstats sampler reads);
- node_exporter's CPU time by mode (`node_cpu_seconds_total`);
- postgres_exporter's `pg_stat_database` counters, when Prometheus has them.

Series (`prom.<role>.write_iops`, `prom.cpu.user_pct`, `prom.pg.commits_per_s`) come from
`/api/v1/query_range` of `irate(...)` on the sampling interval's grid; the step's totals
(`prom_<role>_write_bytes`) come from the raw samples of the window (an instant query of a
range selector), interpolated at the step's start and end, so that they cover the step
exactly like the local counters do. What could not be matched is said in a warning and in
the `io.prometheus` section. It never stops a step.
"""

from __future__ import annotations

import socket
import statistics
import time
import urllib.parse
from collections import defaultdict

from howfast.errors import UsageError
from howfast.machine.devices import RoleDevice
from howfast.model import JSONValue, Sample
from howfast.samplers.base import Sampler, SamplerContext, SamplerResult, describe_failure
from howfast.samplers.promapi import (
    DISK_COUNTERS,
    PG_COUNTERS,
    PromClient,
    PromError,
    alternatives,
    cpu_rate_query,
    disk_rate_query,
    disk_selector,
    pg_rate_query,
    range_selector,
    string_literal,
    window_increase,
)
from howfast.samplers.session import SamplerFactory
from howfast.targets.base import Target

WAIT_S = 30.0  # at most this long after a step for Prometheus to scrape past its end
POLL_S = 0.5
LOOKBACK_S = 120.0  # raw samples from this long before the step: one before its start
# node_exporter's CPU modes -> the local cpu sampler's shares (user includes nice, system
# includes interrupts).
CPU_SHARES = {
    "user": ("user", "nice"),
    "system": ("system", "irq", "softirq"),
    "iowait": ("iowait",),
    "steal": ("steal",),
    "idle": ("idle",),
}
DISK_SERIES = {  # counter -> (series field, scale)
    "reads_completed": ("read_iops", 1.0),
    "writes_completed": ("write_iops", 1.0),
    "read_bytes": ("read_mbps", 1e-6),
    "written_bytes": ("write_mbps", 1e-6),
}


def prometheus_samplers(url: str) -> list[SamplerFactory]:
    """The sampler factory of `--prometheus URL` (checked here, before anything runs)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UsageError(f"--prometheus {url!r}: expected http://HOST:PORT of a Prometheus server")

    def make(target: Target, roles: list[RoleDevice]) -> Sampler | None:
        return PrometheusSampler(PromClient(url), roles)

    return [make]


def local_names() -> set[str]:
    names = {"localhost", "127.0.0.1", "::1", "[::1]"}
    for name in (socket.gethostname(), socket.getfqdn()):
        names |= {name, name.split(".")[0]}
    return names


def instance_host(instance: str) -> str:
    """`host:port` (or `[v6]:port`) -> host."""
    if instance.startswith("["):
        return instance[1 : instance.find("]")] if "]" in instance else instance
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


def choose_instance(instances: set[str], prefer: str | None = None) -> tuple[str | None, str]:
    """One exporter instance among those that answered, and a note when that was a choice:
    the one already chosen for the disks, else this machine's, else the only one."""
    if not instances:
        return None, ""
    if prefer in instances:
        return prefer, ""
    if len(instances) == 1:
        return next(iter(instances)), ""
    local = sorted(i for i in instances if instance_host(i) in local_names())
    chosen = local[0] if local else sorted(instances)[0]
    return (
        chosen,
        f"{len(instances)} instances answered ({', '.join(sorted(instances))}); used {chosen}",
    )


class PrometheusSampler(Sampler):
    name = "prometheus"

    def __init__(self, client: PromClient, roles: list[RoleDevice], wait_s: float = WAIT_S) -> None:
        self.client = client
        self.devices = {r.role: r.device for r in roles if r.device and not r.shares_with}
        self.wait_s = wait_s
        self.ctx: SamplerContext | None = None
        self.found: list[str] = []
        self.missing: list[str] = []
        self.notes: list[str] = []

    def start(self, ctx: SamplerContext) -> None:
        self.ctx = ctx  # nothing to read before the step: Prometheus keeps the history

    def stop(self) -> SamplerResult:
        out = SamplerResult()
        if self.ctx is None:
            return out
        start = self.ctx.started_wall
        stopped = self.ctx.stopping_at
        end = start + (stopped if stopped is not None else self.ctx.now())
        step = self.ctx.interval_s
        try:
            self._wait_for_scrape(end)
            instance = self._disks(out, start, end, step)
            self._cpu(out, start, end, step, instance)
            self._postgres(out, start, end, step)
        except PromError as exc:
            out.warnings.append(f"sampler prometheus: {describe_failure(exc)}")
        except Exception as exc:  # a bug here must not lose the step
            out.warnings.append(
                f"sampler prometheus failed: {type(exc).__name__}: {describe_failure(exc)}"
            )
        if self.missing:
            out.warnings.append("sampler prometheus could not match: " + "; ".join(self.missing))
        section: dict[str, JSONValue] = {
            "url": self.client.base,
            "start": round(start, 3),
            "end": round(end, 3),
            "found": self.found,
            "missing": self.missing,
        }
        if self.notes:
            section["notes"] = self.notes
        out.sections["io"] = {"prometheus": section}
        return out

    # --- the window's last scrape -----------------------------------------------------

    def _wait_for_scrape(self, end: float) -> None:
        """Until every series we read has a sample at or after the step's end (at most
        wait_s): the last interval of the step is then in Prometheus too."""
        if self.devices:  # one metric name: timestamp() drops names, so no duplicates
            devices = string_literal(alternatives(self.devices.values()))
            selector = f"node_disk_written_bytes_total{{device=~{devices}}}"
        else:
            selector = "node_cpu_seconds_total{mode=" + string_literal("idle") + "}"
        deadline = time.monotonic() + self.wait_s
        while True:
            series = self.client.query(f"min(timestamp({selector}))", time.time())
            latest = [p[1] for s in series for p in s.points]
            if not latest or min(latest) >= end:
                return
            if time.monotonic() >= deadline:
                self.notes.append(
                    f"no scrape after the step's end within {self.wait_s:g} s: the last "
                    "interval is missing from these figures"
                )
                return
            time.sleep(POLL_S)

    # --- node_exporter disks ----------------------------------------------------------

    def _disks(self, out: SamplerResult, start: float, end: float, step: float) -> str | None:
        if not self.devices:
            self.missing.append(
                "node_disk_*: no local block device behind the target's storage (an existing "
                "server, or tmpfs)"
            )
            return None
        now = time.time()
        raw = self.client.query(
            range_selector(disk_selector(self.devices.values()), now - start + LOOKBACK_S), now
        )
        instance, note = choose_instance({s.labels.get("instance", "") for s in raw})
        if note:
            self.notes.append(f"node_disk_*: {note}")
        seconds = max(end - start, 1e-9)
        for role, device in self.devices.items():
            mine = {
                s.name: s
                for s in raw
                if s.labels.get("device") == device and s.labels.get("instance", "") == instance
            }
            if not mine:
                self.missing.append(f"node_disk_* for device {device} ({role} role): no series")
                continue
            for counter, key in DISK_COUNTERS.items():
                name = f"node_disk_{counter}_total"
                series = mine.get(name)
                if series is None:
                    self.missing.append(f"{name} for device {device} ({role} role)")
                    continue
                self.found.append(series.describe())
                total = window_increase(series.points, start, end)
                if total is None:
                    self.missing.append(
                        f"{name} for device {device}: no samples around the step's start and end"
                    )
                    continue
                kind, what = key.split("_")
                if what == "ops":
                    out.metrics[f"prom_{role}_{kind}_iops"] = total / seconds
                    out.metrics[f"prom_{role}_{kind}s"] = total
                else:
                    out.metrics[f"prom_{role}_{kind}_bytes"] = total
                    out.metrics[f"prom_{role}_{kind}_mbps"] = total / 1e6 / seconds
            for counter, (field, scale) in DISK_SERIES.items():
                found = self.client.query_range(
                    disk_rate_query(counter, [device]), start, end, step
                )
                for series in found:
                    if series.labels.get("instance", "") == instance:
                        points = [
                            Sample(round(t - start, 3), v * scale)
                            for t, v in series.points
                            if t > start
                        ]
                        if points:
                            out.series[f"prom.{role}.{field}"] = points
        return instance

    # --- node_exporter CPU --------------------------------------------------------------

    def _cpu(
        self, out: SamplerResult, start: float, end: float, step: float, prefer: str | None
    ) -> None:
        found = self.client.query_range(cpu_rate_query(), start, end, step)
        instance, note = choose_instance({s.labels.get("instance", "") for s in found}, prefer)
        if instance is None:
            self.missing.append("node_cpu_seconds_total: no series")
            return
        if note:
            self.notes.append(f"node_cpu_seconds_total: {note}")
        self.found.append(f'node_cpu_seconds_total{{instance="{instance}"}}')
        by_time: dict[float, dict[str, float]] = defaultdict(dict)
        for series in found:
            if series.labels.get("instance", "") != instance:
                continue
            for t, v in series.points:
                by_time[t][series.labels.get("mode", "")] = v
        shares: dict[str, list[Sample]] = {name: [] for name in CPU_SHARES}
        for t in sorted(by_time):
            modes = by_time[t]
            total = sum(modes.values())
            if t <= start or total <= 0:
                continue
            for name, parts in CPU_SHARES.items():
                value = sum(modes.get(p, 0.0) for p in parts) / total * 100
                shares[name].append(Sample(round(t - start, 3), value))
        for name, points in shares.items():
            if points:
                out.series[f"prom.cpu.{name}_pct"] = points
                if name != "idle":
                    out.metrics[f"prom_cpu_{name}_pct"] = statistics.fmean(p.value for p in points)

    # --- postgres_exporter --------------------------------------------------------------

    def _postgres(self, out: SamplerResult, start: float, end: float, step: float) -> None:
        for column, field in PG_COUNTERS.items():
            found = self.client.query_range(pg_rate_query(column), start, end, step)
            instance, note = choose_instance({s.labels.get("instance", "") for s in found})
            if instance is None:
                self.missing.append(f"pg_stat_database_{column} (postgres_exporter): no series")
                continue
            if note:
                self.notes.append(f"pg_stat_database_{column}: {note}")
            series = next(s for s in found if s.labels.get("instance", "") == instance)
            self.found.append(f'pg_stat_database_{column}{{instance="{instance}"}}')
            points = [Sample(round(t - start, 3), v) for t, v in series.points if t > start]
            if points:
                out.series[f"prom.pg.{field}_per_s"] = points
                out.metrics[f"prom_pg_{field}_per_s"] = statistics.fmean(p.value for p in points)
