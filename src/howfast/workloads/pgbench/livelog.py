"""The live view of a pgbench run that prints no progress lines: its per-transaction logs,
followed as pgbench writes them.

Why: `-P 1` makes pgbench's first thread wait with a time-out after every transaction (to
print on time), and on a client-bound test in a VM that cost 2-4% of the TPS (measured:
docs/commands/run.md). Where the log is sampled at a high rate the log already holds what
the live view needs: each second's logged transactions (count / sampling rate = TPS) and
their mean latency. pgbench buffers each thread's file (4 KiB at a time, about every 70
lines), so a second is reported once every file has moved past it, or DELAY_S after it.

Only for logs on this machine (hosts whose `follows_files` is true); the lines are the
per-transaction layout of txlog.py. `LiveTotals` is pure; `LogFollower` is the thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

POLL_S = 1.0
DELAY_S = 2  # a second is complete when every file is past it, or this long after it


@dataclass
class _Second:
    transactions: int = 0
    latency_us: int = 0  # of the transactions with a latency (not skipped or failed)
    timed: int = 0


@dataclass
class LiveTotals:
    """Logged transactions by epoch second, from complete lines; what has been reported."""

    sampling_rate: float | None
    seconds: dict[int, _Second] = field(default_factory=dict)
    newest: dict[str, int] = field(default_factory=dict)  # file -> latest second seen in it
    reported: int | None = None  # the latest second reported
    first: int | None = None

    def add_lines(self, name: str, lines: list[str]) -> None:
        for line in lines:
            fields = line.split()
            if len(fields) < 6 or not fields[4].isdigit():
                continue  # not a per-transaction line: left to txlog.py, which counts them
            second = int(fields[4])
            bucket = self.seconds.setdefault(second, _Second())
            bucket.transactions += 1
            if fields[2].isdigit():
                bucket.latency_us += int(fields[2])
                bucket.timed += 1
            self.newest[name] = max(self.newest.get(name, second), second)
            if self.first is None or second < self.first:
                self.first = second

    def complete(self, now_epoch: float, files: int) -> list[tuple[float, dict[str, float]]]:
        """The seconds that can be reported now, as (t since the first second's end, values):
        `tps` (the logged count scaled up by the sampling rate) and `latency_ms`."""
        if self.first is None:
            return []
        behind = min(self.newest.values()) if len(self.newest) >= files else None
        limit = int(now_epoch) - DELAY_S
        if behind is not None:
            limit = max(limit, behind - 1)
        out = []
        scale = 1 / self.sampling_rate if self.sampling_rate else 1.0
        # The first second is partial (pgbench started within it): never reported.
        start = (self.first if self.reported is None else self.reported) + 1
        for second in range(start, limit + 1):
            bucket = self.seconds.pop(second, _Second())
            values = {"tps": bucket.transactions * scale}
            if bucket.timed:
                values["latency_ms"] = bucket.latency_us / bucket.timed / 1000
            out.append((float(second - self.first), values))
            self.reported = second
        return out


class LogFollower:
    """Reads the new complete lines of the files `pattern` matches in `directory` every
    POLL_S and hands each complete second to `on_progress(t, values)`."""

    def __init__(
        self,
        directory: Path,
        pattern: str,
        sampling_rate: float | None,
        on_progress: Callable[[float, dict[str, float]], None],
        files: int,
    ) -> None:
        self.directory = directory
        self.pattern = pattern
        self.files = files  # pgbench writes one file per thread
        self.totals = LiveTotals(sampling_rate)
        self.on_progress = on_progress
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="howfast-livelog")

    def __enter__(self) -> LogFollower:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.poll(time.time())
            except OSError:
                continue  # a file rotated or removed under us: the next poll sees

    def poll(self, now_epoch: float) -> None:
        for path in sorted(self.directory.glob(self.pattern)):
            offset = self._offsets.get(path, 0)
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read()
            if not data:
                continue
            self._offsets[path] = offset + len(data)
            data = self._partial.pop(path, b"") + data
            complete, _, rest = data.rpartition(b"\n")
            if rest:
                self._partial[path] = rest
            lines = complete.decode(errors="replace").splitlines()
            self.totals.add_lines(path.name, lines)
        for t, values in self.totals.complete(now_epoch, self.files):
            self.on_progress(t, values)
