"""Trials (`--trials N`, docs/events.md "Trials: running them") on real PostgreSQL: each
pgbench step with events run as N short windows of load, stored as repetitions with
`trials` in their params, the design rebuilt between failover trials, a line per trial.

Loss must be observable when it exists (issue 38, item 3): an asynchronous standby on a
volume 2 ms slower per I/O, 4 tpcb-like clients: the primary, asked just before the kill,
had WAL the standby had not flushed. Measured on this machine before the test was written:
behind at the kill in 6 of 6 trials (456 to 16,552 bytes), commits proven lost in 2 of them,
at most lost (in doubt) in all 6; then 10 of 10 behind, 2 of 10 proven lost in
benchmarks/failover-trials. With the node failure's link cut (the standby's replication
connection cut while the primary's processes are stopped, before the kill), 10 more trials:
10 of 10 behind (480 to 38,704 bytes), 2 of 10 proven lost (2 commits each), lost or in
doubt in 9 of 10; then in benchmarks/failover-trials 10 of 10 behind, 2 of 10 proven lost,
8 of 10 lost or in doubt: the cut does not raise the count here, because on loopback what the
walsender wrote into its socket is already in the standby's kernel (kept by a failed node's
standby too); what is lost is what was acknowledged but not yet sent (docs/events.md).

So, with 4 trials: "behind in at least 1" fails only if the standby is caught up at all 4
kills (1 of 40 measured was, in a run of this test); "lost or in doubt in at least 1"
fails only if none of 4 trials had a commit cut or lost (31 of 34 measured with the cut,
this test's 4 included, had: with 1 in 10 missing, all 4 miss about once in 10,000 runs).
Proven loss is not asserted: about 2 in 10 would miss all 4 trials about 4 times in 10
(docs/events.md: behind is not lost).
A synchronous standby loses nothing acknowledged, in every trial."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from howfast.event_marks import marks_from_section
from howfast.machine.packetfilter import PacketFilter
from howfast.store import open_store
from howfast.targets.emulated.volume import available
from tests.integration.conftest import Howfast, postgres_pids_under
from tests.integration.packet_filter_checks import (
    chains_of_run,
    chains_registered_by,
    howfast_chains_now,
)

pytestmark = pytest.mark.integration

TIMEOUT_S = 900  # 4 trials of a 12 s window and a rebuild each, on a loaded machine

TRIAL_LINE = re.compile(r"^trial (\d+)/(\d+): (.*)$", re.MULTILINE)


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the servers run as their own OS user")


def _trials(doc: dict[str, object]) -> list[dict[str, object]]:
    steps = doc["steps"]
    assert isinstance(steps, list)
    return [s for s in steps if s["workload"] == "pgbench" and "trials" in s["params"]]


def _check_line(text: str, event: dict[str, object]) -> None:
    """The trial line runner/trials.py prints, from the event's stored figures. The line
    rounds the outage as measured to 0.1 s, the JSON keeps it to 0.001 s: rounded twice, the
    two may differ by one in the last digit (1.1501 s prints 1.2, stored as 1.15 it prints 1.1)."""
    down = event["downtime_s"]
    lost, most, doubt = event["lost_commits"], event["lost_commits_max"], event["in_doubt"]
    assert isinstance(down, float | int)
    rest = f"{lost} lost" if most == lost else f"{lost} lost ({doubt} in doubt)"
    found = re.fullmatch(r"(\d+\.\d) s down, (.*)", text)
    assert found is not None, text
    assert abs(float(found[1]) - down) <= 0.05 + 0.0005 + 1e-9, (text, down)
    assert found[2] == rest, (text, event["line"])


def _check_trials(out_stderr: str, doc: dict[str, object], n: int) -> list[dict[str, object]]:
    """N completed trials, repetitions 1..N of one test with `trials: N`, each with a
    verified failover and its line on stderr; their events, in order."""
    trials = _trials(doc)
    assert len(trials) == n
    assert [t["params"].get("repetition", 1) for t in trials] == list(range(1, n + 1))
    events = []
    for trial in trials:
        assert trial["status"] == "completed", trial["error"]
        assert trial["params"]["trials"] == n and trial["params"]["duration_s"] == 12
        (event,) = trial["events"]
        assert event["verified"] is True, event["problem"]
        events.append(event)
    for later in trials[1:]:  # every trial after the first starts from the rebuilt design
        restored = later["resolved"]["design_restored"]
        assert restored["standby"] == "standby_1" and restored["primary"] == "standby_1"
        # the promoted standby's volume took the primary's latency (+0 ms), the new one +2 ms
        assert restored["primary_added_latency_ms"] == 0.0
    lines = TRIAL_LINE.findall(out_stderr)
    assert [(int(i), int(total)) for i, total, _ in lines] == [(i, n) for i in range(1, n + 1)]
    for (_, _, text), event in zip(lines, events, strict=True):
        _check_line(text, event)
    return events


def _behind_at_the_kill(howfast: Howfast, run_id: int) -> list[int]:
    """Each trial's `standby_before.unflushed_bytes`: the WAL the dying primary had written
    that its standby had not flushed, as the failover recorded it in the event's facts; and
    the node's link cut at the kill, where the packet filter can be changed, else said not
    to be (docs/events.md: kernel-queued WAL may then still reach the standby)."""
    cuttable = PacketFilter().unusable() is None
    store = open_store(str(howfast.store), reading=True)
    run = store.get_run(run_id)
    assert run is not None
    behind = []
    for step in run.steps:
        if step.workload != "pgbench" or "trials" not in step.params:
            continue
        (mark,) = marks_from_section(step.sections["events"])  # type: ignore[arg-type]
        seen = mark.facts["standby_before"]
        assert isinstance(seen, dict) and seen["state"] == "streaming", seen
        assert isinstance(seen["unflushed_bytes"], int), seen
        # where the rest of the WAL stood: not written, not even sent (what can be lost)
        assert isinstance(seen["unwritten_bytes"], int) and isinstance(seen["unsent_bytes"], int)
        assert seen["unsent_bytes"] <= seen["unwritten_bytes"] <= seen["unflushed_bytes"], seen
        print(f"at the kill: {seen}")
        if cuttable:
            assert mark.facts["link_cut"] is True, mark.facts
            assert mark.facts["link_left"] is False, mark.facts  # lifted after the promotion
            queued = mark.facts["queued_at_kill"]
            assert isinstance(queued, dict) and isinstance(queued["standby_unread_bytes"], int)
        else:
            assert mark.facts["link_cut"] is False
            assert "under-counted" in str(mark.facts["link_not_cut"]), mark.facts
        behind.append(seen["unflushed_bytes"])
    return behind


def _no_link_cut_left(howfast: Howfast, run_id: int) -> None:
    """Each trial's link cut (an iptables chain, where the packet filter can be changed) is
    named by its failover's facts and gone; the registry file of the run's howfast, which
    stays while anything it names is left, names none either. Only the run's own chains are
    looked at: other tests make theirs meanwhile (packet_filter_checks.py)."""
    ours = chains_of_run(howfast.store, run_id) | chains_registered_by(howfast.started[-1].pid)
    if PacketFilter().unusable() is None:
        assert ours, "no trial names the chain of its link cut"
    assert ours.isdisjoint(howfast_chains_now()), ours


def _slower() -> list[str]:
    if available().name is None:
        pytest.skip("no emulated volumes here (nbdkit): the standby cannot be made slower")
    # the primary on an emulated volume too (+0 ms): every trial on the same storage, the
    # promoted standby's volume taking the primary's latency after each failover
    return ["--standby-latency", "2ms", "--storage-latency", "0ms"]


@pytest.mark.emulated  # the standby on a 2 ms volume (nbdkit, nbdfuse, loop devices)
def test_async_failover_trials_find_the_standby_behind(howfast: Howfast, target_dir: Path) -> None:
    out = howfast(
        "run", "failover-trials", "--target", str(target_dir), "--sync", "off", *_slower(),
        "--trials", "4", "--json", timeout=TIMEOUT_S,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    events = _check_trials(out.stderr, doc, 4)
    behind = _behind_at_the_kill(howfast, doc["id"])
    for event, seen in zip(events, behind, strict=True):
        print(f"{event['line']} | standby behind {seen} bytes")
    # see the module's docstring for the bounds: behind in 39 of 40 measured trials, lost
    # or in doubt in 31 of 34
    assert sum(1 for b in behind if b > 0) >= 1, behind
    # asynchronous: the count of what may be lost is given for every trial
    assert all(isinstance(e["lost_commits_max"], int) for e in events)
    assert sum(1 for e in events if e["lost_commits_max"] > 0) >= 1, events
    assert postgres_pids_under(target_dir) == []
    _no_link_cut_left(howfast, doc["id"])
    assert list(target_dir.iterdir()) == []


@pytest.mark.emulated
def test_sync_on_failover_trials_lose_nothing_in_any(howfast: Howfast, target_dir: Path) -> None:
    out = howfast(
        "run", "failover-trials", "--target", str(target_dir), "--sync", "on", *_slower(),
        "--trials", "4", "--json", timeout=TIMEOUT_S,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    events = _check_trials(out.stderr, doc, 4)
    for event in events:
        print(event["line"])
        assert event["lost_commits"] == 0, event["line"]
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []
    _no_link_cut_left(howfast, doc["id"])


CRASH_PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [2]
duration = "30s"
"""


def test_crash_trials_on_a_plain_directory_each_recover(howfast: Howfast, target_dir: Path) -> None:
    """A crash cuts the service too; without standbys there is nothing to rebuild: each
    trial is a window of 4 + 8 s (not the plan's 30 s) on the server that recovered."""
    plan = howfast.plan(CRASH_PLAN)
    out = howfast("run", str(plan), "--target", str(target_dir), "--trials", "2",
                  "--event", "4s:crash", "--json", timeout=TIMEOUT_S)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    trials = _trials(json.loads(out.stdout))
    assert len(trials) == 2
    lines = TRIAL_LINE.findall(out.stderr)
    assert [(i, n) for i, n, _ in lines] == [("1", "2"), ("2", "2")]
    for trial, (_, _, text) in zip(trials, lines, strict=True):
        assert trial["status"] == "completed", trial["error"]
        assert trial["params"]["duration_s"] == 12
        (event,) = trial["events"]
        assert event["verified"] is True, event["problem"]
        assert event["downtime_s"] > 0
        assert event["lost_commits"] == 0, event["line"]  # a crash keeps what was flushed
        _check_line(text, event)
        assert "design_restored" not in trial["resolved"]
    assert postgres_pids_under(target_dir) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--trials", "3"], "has events"),
        (["--trials", "1", "--event", "4s:crash"], "2 or more"),
        (["--trials", "3", "--event", "4s:crash", "--until", "ci=5%"], "--until"),
        (["--trials", "3", "--event", "3s:crash", "--event", "6s:failover", "--replicas", "1"],
         "promoted standby"),
    ],
)  # fmt: skip
def test_what_trials_refuse_exits_2_and_creates_nothing(
    howfast: Howfast, target_dir: Path, args: list[str], said: str
) -> None:
    out = howfast("run", "quick", "--target", str(target_dir), *args)
    assert out.returncode == 2, out.stderr
    assert said in out.stderr and "Traceback" not in out.stderr
    assert list(target_dir.iterdir()) == []
    assert not howfast.store.exists() or "trial" not in out.stdout


def test_failover_trials_with_a_slower_standby_warn_when_the_primary_is_a_directory(
    howfast: Howfast, target_dir: Path
) -> None:
    """After the first trial's failover the primary runs on the promoted standby's emulated
    volume: in a plain directory the first trial would run on other storage than the next."""
    slower = _slower()
    plain = howfast("run", "failover-trials", "--target", str(target_dir), "--trials", "2",
                    "--standby-latency", "2ms", "--dry-run")  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert "--storage-latency 0ms" in " ".join(plain.stderr.split())
    even = howfast("run", "failover-trials", "--target", str(target_dir), "--trials", "2",
                   *slower, "--dry-run")  # fmt: skip
    assert even.returncode == 0, even.stderr[-2000:]
    assert "after the first trial's failover" not in " ".join(even.stderr.split())
    assert list(target_dir.iterdir()) == []
