"""How much of pgbench's per-transaction log to keep: its --sampling-rate, chosen before the
run from the rate the step is expected to reach, so that the log stays under
LOG_LINES_PER_S lines a second.

Why: pgbench formats one log line per transaction (~4,400 instructions, +50% of its own work
per select-only transaction, measured under valgrind); a random sample of the transactions
gives the same percentiles within an interval that the sample's size says
(analysis/percentiles.py), at a cost that no longer grows with the rate.

The expected rate, in this order: the offered rate (`rate`); the TPS of this target's latest
full-speed step of the same test earlier in the run (same clients; else the nearest client
count, scaled by the ratio of clients); for a built-in select-only step of one client, the
round-trip probe that runs before every pgbench step anyway (rtt.py: one client, one
statement a transaction, as fast as it goes, on the load's own host and connection): a share
of its rate, PROBE_TPS_SHARE x 1000 / client_rtt_p50_ms, as that step's transaction is the
probe's with an indexed read in place of `SELECT 1`; else a short calibration run before the
step (CALIBRATION_S seconds of the same command without log, statement latencies or
progress). A step given in transactions logs every one when they are few.

Pure: functions of params and earlier step records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from howfast.model import JSONValue, StepRecord

LOG_LINES_PER_S = 1000
# Above this expected rate, where the log is followed live, pgbench prints no progress
# (-P 1): its timed waits cost 2-4% of the TPS of a client-bound test in a VM (measured,
# docs/commands/run.md); the per-second series and the live view come from the log
# (workloads/pgbench/livelog.py). Below it -P 1 costs nothing measurable and is exact.
PROGRESS_MAX_TPS = 5000
# One second: measured here (quiet 2-core VM, 3-4 rounds, interleaved), a 1 s run's TPS was
# 0.89-1.04 of a 10 s run's of the same command (tpcb-like at 1 and 4 clients, select-only at
# 2), a 2 s run's 0.82-1.06: the machine's own noise, well inside the 0.4-2.4x the log's
# budget tolerates, and the run before each first step of a test costs a second less
# (on Kubernetes, where it runs in the pod, 2.4-2.8 s before).
CALIBRATION_S = 1
# The share of the round-trip probe's rate (1000 / client_rtt_p50_ms) that one select-only
# client is expected to reach. The probe's `SELECT 1` is that client's transaction without
# pgbench's \set, the indexed read's parse, plan and execution, and its median leaves out the
# stalls that a step's mean pays. Measured on a 2-core VM (Unix socket and 127.0.0.1, medians
# of 6 interleaved 2 s runs): quiet, one client ran at 0.59-0.62 of it in simple protocol,
# 0.59 extended, 0.69-0.71 prepared; loaded (load 11-13), 0.20-0.39, 0.13-0.38 and 0.19-0.58,
# and a 3 s howfast step at 0.12. The probe runs in simple protocol whatever the step's -M:
# its figure is the round trip. At 0.3 the log keeps 0.4-2.4x its budget in those cases: near
# enough, as a 2 s calibration run itself measured 5,362-14,384 TPS within a minute on the
# loaded machine, and at one client a logged line costs ~1.5 us (~4,400 instructions), so
# twice the budget costs about 0.15% of the step's time. Low rather than high: an estimate
# 3x too high would leave a 10 s step fewer lines than min_samples(99.9) = 3,688.
PROBE_TPS_SHARE = 0.3
# Fields that make two pgbench steps the same test, whose TPS predicts the other's.
_TEST_KEYS = ("mode", "scripts", "protocol", "extra_args", "settings", "latency_limit_ms")


@dataclass(frozen=True)
class LogPlan:
    """The log's sampling rate (None: every transaction) and what it was chosen from."""

    sampling_rate: float | None
    expected_tps: float | None = None
    # "offered rate", "earlier step", "round-trip probe", "calibration", "every transaction"...
    basis: str = "every transaction"

    def resolved(self) -> dict[str, JSONValue]:
        """What the step records in its resolved params."""
        out: dict[str, JSONValue] = {"log_sampling_rate": self.sampling_rate or 1.0}
        if self.expected_tps is not None:
            out["log_expected_tps"] = round(self.expected_tps, 1)
        out["log_sampling_basis"] = self.basis
        return out


def sampling_rate(expected_tps: float, lines_per_s: int = LOG_LINES_PER_S) -> float | None:
    """The fraction of transactions to log at this rate: None (all) when they are few enough,
    else lines_per_s / expected_tps, rounded down to 3 significant digits (pgbench prints it)."""
    if expected_tps <= lines_per_s:
        return None
    rate = lines_per_s / expected_tps
    digits = 2 - int(f"{rate:e}".split("e")[1])  # 3 significant digits
    scale = 10.0**digits
    return max(int(rate * scale), 1) / scale


def pgbench_progress(plan: LogPlan, follows_files: bool) -> bool:
    """Whether the measuring run asks pgbench for per-second progress lines (-P 1)."""
    if not follows_files or plan.expected_tps is None:
        return True
    return plan.expected_tps <= PROGRESS_MAX_TPS


def wants_sampling(params: dict[str, JSONValue]) -> bool:
    """Whether the step samples its log at all: not when asked for every transaction
    (`latency_log: full`), nor when given so few transactions that they fit the budget of a
    10 s run."""
    if params.get("latency_log") == "full":
        return False
    transactions, clients = params.get("transactions"), params.get("clients")
    if isinstance(transactions, int) and isinstance(clients, int):
        return transactions * clients > LOG_LINES_PER_S * 10
    return True


def plan_from_history(
    params: dict[str, JSONValue], previous: Sequence[StepRecord]
) -> LogPlan | None:
    """The log plan when the offered rate or an earlier step says the expected rate; None
    when the round-trip probe or a calibration run must tell it."""
    if not wants_sampling(params):
        return LogPlan(None, basis="every transaction")
    rate = params.get("rate")
    if isinstance(rate, int | float):
        return LogPlan(sampling_rate(float(rate)), float(rate), "offered rate")
    expected = expected_tps(params, previous)
    if expected is None:
        return None
    return LogPlan(sampling_rate(expected), expected, "earlier step")


def probe_predicts(params: dict[str, JSONValue]) -> bool:
    """Whether the round-trip probe stands in for this step's calibration run: a built-in
    select-only step of one client, with no extra pgbench options (any of them may change the
    transaction or its pace)."""
    return (
        params.get("mode") == "select-only"
        and not params.get("scripts")
        and params.get("clients") == 1
        and not params.get("extra_args")
    )


def plan_from_round_trip(params: dict[str, JSONValue], rtt_p50_ms: JSONValue) -> LogPlan | None:
    """The log plan from the round-trip probe's median round trip (`client_rtt_p50_ms`; None
    when the probe failed), PROBE_TPS_SHARE of its rate, for a step that probe_predicts();
    None for any other step, or without the probe's figure: a calibration run must tell."""
    if not probe_predicts(params) or isinstance(rtt_p50_ms, bool):
        return None
    if not isinstance(rtt_p50_ms, int | float) or rtt_p50_ms <= 0:
        return None
    tps = PROBE_TPS_SHARE * 1000.0 / rtt_p50_ms
    return LogPlan(sampling_rate(tps), tps, "round-trip probe")


def plan_from_calibration(tps: float | None) -> LogPlan:
    """The log plan from a calibration run's TPS; every transaction when it printed none."""
    if tps is None or tps <= 0:
        return LogPlan(None, basis="every transaction (the calibration run measured nothing)")
    return LogPlan(sampling_rate(tps), tps, "calibration")


def expected_tps(params: dict[str, JSONValue], previous: Sequence[StepRecord]) -> float | None:
    """The TPS this step should reach, from the latest completed full-speed step of the same
    test on this target: the same client count, else the nearest one, its TPS scaled by the
    ratio of clients (an overestimate past saturation, which only logs fewer lines)."""
    clients = params.get("clients")
    if not isinstance(clients, int):
        return None
    key = _test_key(params)
    nearest: tuple[float, float] | None = None  # (distance, tps scaled)
    for step in reversed(previous):
        if step.workload != "pgbench" or step.status != "completed":
            continue
        earlier = step.all_params
        tps = step.metrics.get("tps")
        if earlier.get("rate") is not None or _test_key(earlier) != key:
            continue
        other = earlier.get("clients")
        if not isinstance(tps, int | float) or not isinstance(other, int) or tps <= 0:
            continue
        if other == clients:
            return float(tps)
        distance = max(other, clients) / min(other, clients)
        if nearest is None or distance < nearest[0]:
            nearest = (distance, float(tps) * clients / other)
    return nearest[1] if nearest else None


def calibration_params(params: dict[str, JSONValue]) -> dict[str, JSONValue]:
    """The params of the calibration run: the same test for CALIBRATION_S seconds (or less
    for a shorter step)."""
    out = {k: v for k, v in params.items() if k not in ("transactions", "duration_s")}
    duration = params.get("duration_s")
    seconds = CALIBRATION_S
    if isinstance(duration, int | float):
        seconds = max(1, min(CALIBRATION_S, int(duration)))
    out["duration_s"] = seconds
    return out


def _test_key(params: dict[str, JSONValue]) -> tuple[str, ...]:
    return tuple(repr(params.get(k)) for k in _TEST_KEYS)
