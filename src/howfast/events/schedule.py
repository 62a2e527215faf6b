"""The events of one step, applied in a thread at their times into the load (docs/events.md).

One action at a time: an event whose time comes while an earlier one is still applying waits
(its mark's `applied_s` is later than its `at_s`). A `for=` action is undone at its window's
end, in the same thread and in time order with the other events; one without `for=` (a
latency set for the rest of the step) after the load, so the next step finds the target as
it was. An action that raises ends
the schedule: its mark carries the error, the events after it are marked skipped, and what was
applied and not yet undone is undone. `finish()` (the load ended) and `cancel()` (Ctrl-C) undo
what is pending at once and join the thread; a window undone before its end says so.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from howfast.event_marks import EventMark
from howfast.events.base import Applied, EventAction, EventContext
from howfast.eventspec import EventSpec
from howfast.model import JSONValue
from howfast.plugin.events import disturbs_service

# After the service came back, failures are still the event's (samplers, the load).
GRACE_S = 2.0


class EventSchedule:
    def __init__(
        self,
        context: Callable[[Callable[[], float]], EventContext],
        specs: Sequence[EventSpec],
        actions: Mapping[str, EventAction],
        *,
        observer: Callable[[EventMark], None] = lambda mark: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`context(now)` makes the actions' context once the load has started; `now()` is
        seconds into the load."""
        self._specs = sorted(specs, key=lambda s: s.at_s)
        self._actions = actions
        self._context = context
        self._observer = observer
        self._clock = clock
        self._origin: float | None = None
        self._stop = threading.Event()  # finish() or cancel(): no more waiting
        self._lock = threading.Lock()
        self._marks: dict[int, EventMark] = {}
        self._in_flight: EventSpec | None = None
        self._thread: threading.Thread | None = None
        self._cancelled = False

    # --- the load's side -----------------------------------------------------------------

    def start(self, origin_epoch: float) -> None:
        """The load's first segment started at `origin_epoch` (epoch seconds): time 0."""
        if self._thread is not None:
            return
        self._origin = origin_epoch
        self._thread = threading.Thread(target=self._run, name="howfast-events", daemon=True)
        self._thread.start()

    def now(self) -> float:
        return self._clock() - self._origin if self._origin is not None else 0.0

    def marks(self) -> tuple[EventMark, ...]:
        with self._lock:
            return tuple(self._marks[i] for i in sorted(self._marks))

    def disturbed(self) -> bool:
        """An action that cuts the service is applying, or its service came back less than
        GRACE_S ago."""
        with self._lock:
            if self._in_flight is not None and disturbs_service(self._in_flight.action):
                return True
            now = self.now()
            return any(
                disturbs_service(m.action) and m.back_s is not None and now - m.back_s < GRACE_S
                for m in self._marks.values()
            )

    def finish(self, timeout_s: float) -> tuple[EventMark, ...]:
        """The load ended: the events not applied yet are marked skipped, pending undos run
        now; waits up to `timeout_s` for an action under way."""
        self._stop.set()
        if self._thread is None:
            self._skip_rest(0, "the load ended before its time")
        else:
            self._thread.join(timeout_s)
        return self.marks()

    def cancel(self) -> None:
        """Ctrl-C: stop waiting, undo what is pending (the action under way stops through its
        own cancel token), join."""
        self._cancelled = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    # --- the schedule's thread ------------------------------------------------------------

    def _run(self) -> None:
        ctx = self._context(self.now)
        # (time into the load, order, kind, index): events and the undos of for= windows
        agenda: list[tuple[float, int, str, int]] = [
            (spec.at_s, 1, "apply", i) for i, spec in enumerate(self._specs, start=1)
        ]
        undos: dict[int, tuple[Applied, EventSpec]] = {}
        try:
            while agenda:
                agenda.sort()
                when, _, kind, index = agenda.pop(0)
                if self._stop.wait(max(0.0, when - self.now())):
                    break
                spec = self._specs[index - 1]
                if kind == "undo":
                    self._undo(index, *undos.pop(index), early=False)
                    continue
                applied = self._apply(ctx, index, spec)
                if applied is None:
                    self._skip_rest(index, "an earlier event failed")
                    return
                if applied.undo is not None:  # without for=: undone after the load
                    undos[index] = (applied, spec)
                    if spec.ends_s is not None:
                        agenda.append((spec.ends_s, 0, "undo", index))
            self._skip_rest(0, "the load ended before its time")
            if undos:  # without for=: they last until the load's end (finish) or Ctrl-C
                self._stop.wait()
        finally:
            for index, (applied, spec) in sorted(undos.items()):
                self._undo(index, applied, spec, early=True)

    def _apply(self, ctx: EventContext, index: int, spec: EventSpec) -> Applied | None:
        action = self._actions[spec.action]
        # Under way, and not back yet: the load's failures from now on are this event's.
        mark = EventMark(index, spec.text, spec.action, spec.at_s, applied_s=round(self.now(), 6))
        with self._lock:
            self._in_flight = spec
            self._marks[index] = mark
        try:
            applied = action.apply(ctx, spec)
        except Exception as exc:
            failed = dataclasses.replace(mark, applied_s=round(self.now(), 6), error=str(exc))
            self._record(failed, done=True)
            return None
        mark = dataclasses.replace(
            mark,
            applied_s=round(applied.applied_s, 6),
            back_s=None if applied.back_s is None else round(applied.back_s, 6),
            facts=dict(applied.facts),
        )
        # The load sees the service's return at once; in the same breath the action stops
        # being in flight, so that disturbed() never says no between the two (a sampler's
        # reading that failed during the outage would end it).
        self._record(mark, done=True)
        try:
            verified = action.verify(ctx, spec, applied)
        except Exception as exc:
            mark = dataclasses.replace(mark, verified=False, problem=f"could not verify: {exc}")
        else:
            mark = dataclasses.replace(
                mark,
                verified=verified.ok,
                evidence=dict(verified.evidence),
                problem=verified.problem,
            )
        self._record(mark, tell=True)
        return applied

    def _undo(self, index: int, applied: Applied, spec: EventSpec, *, early: bool) -> None:
        assert applied.undo is not None
        with self._lock:
            mark = self._marks[index]
        facts: dict[str, JSONValue] = dict(mark.facts)
        began = round(self.now(), 6)
        try:
            facts["undo"] = dict(applied.undo())
        except Exception as exc:
            facts["undo_error"] = str(exc)
        if spec.ends_s is None:  # not a window: the step's figures have no "during"
            facts["restored_after_load"] = True
            self._record(dataclasses.replace(mark, facts=facts))
            return
        if early:
            facts["undone_early"] = "the load ended before the window's end"
        ended = (
            began if self._actions[spec.action].window_ends_as_undo_begins else round(self.now(), 6)
        )
        self._record(dataclasses.replace(mark, undone_s=ended, facts=facts))

    def _skip_rest(self, after: int, why: str) -> None:
        for i, spec in enumerate(self._specs, start=1):
            with self._lock:
                known = i in self._marks
            if i > after and not known:
                problem = "not applied: Ctrl-C" if self._cancelled else f"not applied: {why}"
                self._record(
                    EventMark(i, spec.text, spec.action, spec.at_s, skipped=True, problem=problem),
                    tell=True,
                )

    def _record(self, mark: EventMark, *, tell: bool = False, done: bool = False) -> None:
        with self._lock:
            self._marks[mark.index] = mark
            if done:
                self._in_flight = None
        if tell:
            self._observer(mark)
