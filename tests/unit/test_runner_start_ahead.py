"""The next Kubernetes target's objects are made before the previous target's last step
(StartsAhead, issue 34), and whatever ends the run, what was made ahead is removed. The
targets are the fakes of test_runner_stop_aside.py, which only say when each of their moves
happens: what is tested is the runner's order, which no real target shows without a cluster
(the lab tests run the Kubernetes targets through it)."""

from __future__ import annotations

import threading

from howfast.errors import Aborted
from howfast.runner.run import made_ahead
from howfast.targets.capabilities import StartsAhead
from tests.unit.test_runner_stop_aside import Aside, Log, Recording, run


class Ahead(Aside, StartsAhead):
    def __init__(self, name: str, log: Log) -> None:
        super().__init__(name, log)
        self.ahead_aborts = False
        self.drains = False

    def start_ahead(self) -> None:
        self.log.add(f"{self.name} made ahead")
        if self.ahead_aborts:
            raise Aborted("SIGINT")

    def stops_aside(self) -> bool:
        return not self.drains


def test_the_next_target_is_made_before_the_last_step_of_the_previous(
    tmp_path, monkeypatch
) -> None:
    log = Log()
    a, b, c = Ahead("a", log), Ahead("b", log), Ahead("c", log)
    status, _ = run([a, b, c], log, tmp_path, monkeypatch)
    assert status == "completed"
    assert log.lines[:4] == ["a start", "a step", "b made ahead", "a step"]
    # made once each, before the last step of the target before it; the first never
    assert [line for line in log.lines if "ahead" in line] == ["b made ahead", "c made ahead"]
    assert log.lines.index("c made ahead") == log.lines.index("b step") + 1
    assert log.lines[-3:] == ["c step", "c stop begins in MainThread", "c stop ends"]


def test_a_run_stopped_during_the_last_step_removes_what_was_made_ahead(
    tmp_path, monkeypatch
) -> None:
    log = Log()
    a, b = Ahead("a", log), Ahead("b", log)
    add = log.add

    def ctrl_c_in_the_last_step(line: str) -> None:  # the steps say so through the log
        add(line)
        if line == "a step" and "b made ahead" in log.lines:
            raise Aborted("SIGINT")

    monkeypatch.setattr(log, "add", ctrl_c_in_the_last_step)
    status, _ = run([a, b], log, tmp_path, monkeypatch)
    assert status == "aborted"
    assert "b made ahead" in log.lines
    assert "b start" not in log.lines
    # a stopped by its session, b (never opened) by the runner: nothing left of either
    assert "a stop ends" in log.lines
    assert log.lines[-2:] == ["b stop begins in MainThread", "b stop ends"]


def test_a_run_stopped_while_the_next_is_made_ahead_removes_it(tmp_path, monkeypatch) -> None:
    log = Log()
    a, b = Ahead("a", log), Ahead("b", log)
    b.ahead_aborts = True
    status, _ = run([a, b], log, tmp_path, monkeypatch)
    assert status == "aborted"
    assert log.lines.count("a step") == 1  # the last step never ran
    assert "b stop ends" in log.lines and "a stop ends" in log.lines


def test_what_is_made_ahead_and_what_is_not() -> None:
    log = Log()
    k8s, other = Ahead("k8s", log), Ahead("other", log)
    assert made_ahead(k8s, other) is other
    # a local target measures on this machine, where a test cluster may run: nothing beside it
    assert made_ahead(Recording("local", log), other) is None
    assert made_ahead(k8s, Recording("local", log)) is None  # cannot be made ahead
    # a drain may have cordoned a node: the next pod would be scheduled around it
    k8s.drains = True
    assert made_ahead(k8s, other) is None


def test_no_target_is_made_ahead_of_a_single_one(tmp_path, monkeypatch) -> None:
    log = Log()
    status, _ = run([Ahead("a", log)], log, tmp_path, monkeypatch)
    assert status == "completed"
    assert not [line for line in log.lines if "ahead" in line]
    assert not [t for t in threading.enumerate() if t.name == "howfast-stop-aside"]


def test_a_target_made_ahead_whose_start_is_stopped_is_removed(tmp_path, monkeypatch) -> None:
    log = Log()
    a, b = Ahead("a", log), Ahead("b", log)
    b.start_aborts = True  # Ctrl-C while b's server is released and waited for
    status, _ = run([a, b], log, tmp_path, monkeypatch)
    assert status == "aborted"
    assert log.lines.index("b made ahead") < log.lines.index("b start")
    assert "b stop ends" in log.lines and "b step" not in log.lines
