"""Emulated volumes: whether the latency a volume really added is the one that was asked
(docs/emulated-storage.md). Pure; the target records both, this says what they mean."""

from __future__ import annotations

from collections.abc import Mapping

from howfast.model import JSONValue

MISMATCH = 0.25  # warn when the measured added latency is this far from the asked one
SLACK_MS = 0.1  # and more than this: small figures scatter


def latency_warning(asked_ms: float, added_ms: float) -> str | None:
    """Asked vs measured added latency per 4 KiB write at queue depth 1."""
    if abs(added_ms - asked_ms) <= max(MISMATCH * asked_ms, SLACK_MS):
        return None
    if not asked_ms:
        return f"the emulated volume added {added_ms:.2f} ms per write where none was asked"
    return (
        f"the emulated volume added {added_ms:.2f} ms per 4 KiB write at queue depth 1, "
        f"{added_ms / asked_ms - 1:+.0%} off the {asked_ms:g} ms asked"
    )


def emulation_warning(device: Mapping[str, JSONValue]) -> str | None:
    """The warning for a target's `device.emulation` record, when it has both figures."""
    emulation = device.get("emulation")
    if not isinstance(emulation, dict):
        return None
    asked = emulation.get("asked_latency_ms")
    added = emulation.get("measured_added_latency_ms")
    if not isinstance(asked, int | float) or not isinstance(added, int | float):
        return None
    return latency_warning(float(asked), float(added))
