"""Trials (`--trials N`, a plan's `trials`): a pgbench step with events run as N short,
independent windows of load, each with the same events at the same offsets, stored as the
step's repetitions (docs/events.md, "Trials: running them"). Pure: the window's length and
the checks of N; the runner restores the design between trials.

The window is the last event's time (the end of its `for=` window) plus TAIL_S: what the
event figures (analysis/events.py) need after an event. Its outage (a local failover: 0.3 to
0.5 s; a crash: about 1 s of recovery; a restart with a synchronous standby: commits wait up
to 5 s for its walreceiver to retry), then the recovery (the first one-second bin back at 90%
of the baseline, and the next one checked too: 1.5 s measured after a local failover), then
a second of "after" latency. 8 s holds a 5 s outage and its recovery; `--duration` sets a
longer window when an event takes longer to come back from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from howfast.errors import UsageError
from howfast.eventspec import EventSpec

# More trials than this is a mistake, not a test: at about 15 s each, 1000 take four hours.
MAX_TRIALS = 1000
TAIL_S = 8
# A --duration shorter than the last event plus this leaves no second to see recovery in.
MIN_TAIL_S = 3
# The event figures' baseline is the whole seconds from the load's second 1 to the event;
# under 3 of them there is no recovery figure (analysis/events.py MIN_BASELINE_S).
FIRST_EVENT_FOR_RECOVERY_S = 4.0


def check_trials(trials: int, option: str = "--trials") -> int:
    """N itself: at least 2 (one trial is a run with events), at most MAX_TRIALS."""
    if trials < 2:
        raise UsageError(
            f"{option} must be 2 or more, got {trials}: one trial is a plain run with events "
            "(drop it)"
        )
    if trials > MAX_TRIALS:
        raise UsageError(
            f"{option} {trials} is too many: at most {MAX_TRIALS} (each trial is a window of "
            "load and a rebuild of the design: about 15 s or more)"
        )
    return trials


def last_event_end_s(events: Sequence[EventSpec]) -> float:
    """When the last event is over, in seconds into the load: its time, or the end of its
    `for=` window."""
    return max((e.ends_s if e.ends_s is not None else e.at_s) for e in events)


def window_s(events: Sequence[EventSpec], duration_s: float | None = None) -> int:
    """A trial's length of load in whole seconds: `duration_s` (--duration) when given, else
    the last event's end plus TAIL_S. A --duration that leaves under MIN_TAIL_S after the
    last event is refused."""
    end = last_event_end_s(events)
    if duration_s is None:
        return math.ceil(end - 1e-9) + TAIL_S
    if duration_s < end + MIN_TAIL_S:
        raise UsageError(
            f"--duration {duration_s:g}s with --trials: each trial's window must go on at "
            f"least {MIN_TAIL_S} s after the last event ({end:g} s) to see it recover; "
            f"drop --duration for the default ({math.ceil(end - 1e-9) + TAIL_S} s)"
        )
    return int(duration_s)
