"""How much of a transaction the round trips between client and server take, from the
round-trip probe's `client_rtt_p50_ms` (workloads/pgbench/rtt.py) and the step's average
latency. Pure: what `why` says when the network sets the pace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from howfast.model import JSONValue

NETWORK_RULE_SHARE = 0.5  # round trips taking half a transaction's time set its pace
# Statements a built-in transaction sends, each one round trip (BEGIN and END included);
# extended and prepared protocols send one Sync per statement, so the count is the same.
BUILTIN_ROUND_TRIPS = {"tpcb-like": 7, "simple-update": 5, "select-only": 1}


def round_trips(params: Mapping[str, JSONValue]) -> int | None:
    """Round trips per transaction: the built-in mode's, or for custom scripts the count the
    pgbench executor resolved (`statements_per_transaction`); None when unknown."""
    mode = params.get("mode")
    if isinstance(mode, str) and mode in BUILTIN_ROUND_TRIPS:
        return BUILTIN_ROUND_TRIPS[mode]
    counted = params.get("statements_per_transaction")
    if isinstance(counted, int) and not isinstance(counted, bool) and counted > 0:
        return counted
    return None


def network_share(trips: int, rtt_ms: float, latency_ms: float) -> float:
    """The share of a transaction's time its round trips take (may exceed 1: the probe's
    p50 against a latency average)."""
    if trips <= 0 or rtt_ms < 0 or latency_ms <= 0:
        raise ValueError("round trips, round-trip time and latency must be positive")
    return trips * rtt_ms / latency_ms


def ms(value: float) -> str:
    """Milliseconds to two significant digits, trailing zeros kept (0.40, 2.8, 0.024); whole
    from 10 on (37, 120)."""
    if value == 0:
        return "0"
    if value >= 9.95:
        return f"{value:.0f}"
    decimals = max(0, 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    if float(text) >= 10 ** (1 - decimals + 1) and decimals > 0:  # 0.0996 -> 0.10, not 0.100
        text = f"{value:.{decimals - 1}f}"
    return text


def network_sentence(trips: int, rtt_ms: float, latency_ms: float) -> str:
    """ "7 round trips x 0.40 ms = 2.8 ms of the 3.7 ms a transaction takes: the network sets
    the pace"."""
    noun = "round trip" if trips == 1 else "round trips"
    return (
        f"{trips} {noun} x {ms(rtt_ms)} ms = {ms(trips * rtt_ms)} ms of the {ms(latency_ms)} ms "
        "a transaction takes: the network sets the pace"
    )


def network_reason(params: Mapping[str, JSONValue], metrics: Mapping[str, JSONValue]) -> str | None:
    """The sentence when the round trips take at least NETWORK_RULE_SHARE of a transaction's
    average latency; None when they do not, or when the step lacks a figure."""
    trips = round_trips(params)
    rtt = metrics.get("client_rtt_p50_ms")
    latency = metrics.get("latency_avg_ms")
    if trips is None or not isinstance(rtt, int | float) or not isinstance(latency, int | float):
        return None
    if isinstance(rtt, bool) or isinstance(latency, bool) or latency <= 0 or rtt < 0:
        return None
    if network_share(trips, float(rtt), float(latency)) < NETWORK_RULE_SHARE:
        return None
    return network_sentence(trips, float(rtt), float(latency))
