"""An IOPS cap on the server's I/O cgroup for a while, and the server's IOPS under it (issue
29's cap-iops event). The cgroup is the one the server's own I/O is counted in (machine/
serverio.py): howfast's accounting cgroup, the memory cgroup (v2, --memory), or an emulated
volume's. Lifting writes back the rules each file held before the cap."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from howfast.errors import HowfastError
from howfast.iolimits import iops_cap_files, iops_cap_lines, lifted_lines
from howfast.machine.serverio import IoAccount
from howfast.model import JSONValue


class IopsCap:
    def __init__(self, account: IoAccount, disks: Sequence[str]) -> None:
        self.account = account
        self.disks = list(dict.fromkeys(disks))
        self._lift: list[tuple[str, str]] = []  # (file, line) that undo the cap, in order
        self._marks: list[tuple[float, int]] = []  # (monotonic time, the server's I/Os then)

    def _write(self, lines: Sequence[tuple[str, str]]) -> None:
        for name, line in lines:
            try:
                (self.account.path / name).write_text(line)
            except OSError as exc:
                raise HowfastError(
                    f"cannot write '{line}' to {self.account.path / name}: {exc.strerror or exc}"
                ) from None

    def ios(self) -> int:
        """The server's read and write I/Os so far on the capped disks."""
        counters = self.account.read()
        return sum(
            counters.get(d, {}).get("read_ios", 0) + counters.get(d, {}).get("write_ios", 0)
            for d in self.disks
        )

    def set(self, iops: int | None) -> Mapping[str, JSONValue]:
        """Cap at `iops` (read and write each), or lift the cap (None); what was written."""
        if iops is None:
            lift, self._lift = self._lift, []
            self._write(lift)
            return {"lifted": [line for _, line in lift]}
        if not self.disks:
            raise HowfastError("no disk under the server's data or WAL to cap")
        version = self.account.version
        previous = {}
        for name in iops_cap_files(version):
            try:
                previous[name] = (self.account.path / name).read_text()
            except OSError as exc:
                raise HowfastError(
                    f"cannot read {self.account.path / name}: {exc.strerror or exc}"
                ) from None
        lines = [item for d in self.disks for item in iops_cap_lines(version, d, iops).items()]
        lift = [item for d in self.disks for item in lifted_lines(version, d, previous).items()]
        self._lift = lift + self._lift
        self._write(lines)
        # Counted from once the cap is written, not from before: the server's uncapped I/O
        # between the two was counted as capped. On a loaded machine (load 13-15, 2 cores) that
        # moment stretched enough for one client's uncapped I/O in it to read as 112 IOPS over
        # the next second "under a cap of 20" (test_events' cap-iops=20 failed its check).
        self._marks.append((time.monotonic(), self.ios()))
        return {
            "cgroup": str(self.account.path),
            "cgroup_version": version,
            "devices": list(self.disks),
            "lines": [line for _, line in lines],
        }

    def iops_since(self, t: float) -> float | None:
        """The server's IOPS from the latest cap set at or before monotonic time `t` to now;
        None without one."""
        started = [(when, n) for when, n in self._marks if when <= t]
        if not started:
            return None
        when, before = started[-1]
        elapsed = time.monotonic() - when
        return (self.ios() - before) / elapsed if elapsed > 0 else None
