"""pytest plugin of benchmarks/suite-cpu (measuring only, not part of the suite): each test
runs in a CPU-accounting cgroup of its own, so that its CPU, its children's included (howfast,
PostgreSQL, pgbench, fio...), can be read afterwards.

The worker moves itself into the test's group before the test and into an idle group after
it; what the test starts inherits the group. A process that outlives its test (a session
fixture's server, the Kubernetes lab's daemons) keeps being counted in the test that started
it. Each worker writes `<pid>.tsv` (CPU s, wall s, test id) into $SUITE_CPU_DIR at the end.

Enabled only when $SUITE_CPU_DIR and $SUITE_CPU_CGROUP (the group made by suite-cpu, with
$SUITE_CPU_USAGE: `cpuacct.usage` in ns on cgroup v1, `cpu.stat` on v2) are set.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_OUT = os.environ.get("SUITE_CPU_DIR")
_ROOT = os.environ.get("SUITE_CPU_CGROUP")
_USAGE = os.environ.get("SUITE_CPU_USAGE", "cpuacct.usage")
_tests: list[tuple[Path, str, float]] = []  # (group, test id, wall s)


def _enter(group: Path) -> None:
    group.mkdir(parents=True, exist_ok=True)
    (group / "cgroup.procs").write_text(f"{os.getpid()}\n")


def usage_s(group: Path, usage_file: str) -> float:
    """The group's CPU time in seconds (cgroup v1 cpuacct.usage, or v2 cpu.stat)."""
    text = (group / usage_file).read_text()
    if usage_file == "cpu.stat":
        fields = dict(line.split() for line in text.splitlines() if line.strip())
        return int(fields["usage_usec"]) / 1e6
    return int(text) / 1e9


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not (_OUT and _ROOT):
        yield
        return
    worker = Path(_ROOT) / str(os.getpid())
    group = worker / str(len(_tests))
    _enter(group)
    started = time.monotonic()
    try:
        yield
    finally:
        _tests.append((group, item.nodeid, time.monotonic() - started))
        _enter(worker / "idle")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not (_OUT and _ROOT and _tests):
        return
    lines = []
    for group, nodeid, wall in _tests:
        try:
            cpu = f"{usage_s(group, _USAGE):.3f}"
        except (OSError, KeyError, ValueError):
            cpu = "-1"
        lines.append(f"{cpu}\t{wall:.2f}\t{nodeid}\n")
    Path(_OUT, f"{os.getpid()}.tsv").write_text("".join(lines))
