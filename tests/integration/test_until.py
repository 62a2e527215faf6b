"""`howfast run --until` on two real local targets with 1 s steps: the width reached, a budget
that stops first, the interleaving order as stored, Ctrl-C in the middle, and the errors."""

from __future__ import annotations

import json
import shutil
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from howfast.targets.emulated.volume import available
from tests.conftest import PASSWORD, PgServer, shared_tmpdir
from tests.integration.conftest import Howfast, postgres_pids_under

pytestmark = pytest.mark.integration

PLAN = """
description = "until: one short select-only test"
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [2]
duration = "1s"
"""


@pytest.fixture
def second_dir() -> Iterator[Path]:
    base = shared_tmpdir("howfast-target-b-")
    target = base / "bench"
    target.mkdir()
    target.chmod(0o755)
    try:
        yield target
    finally:
        shutil.rmtree(base, ignore_errors=True)


def flat(text: str) -> str:
    return " ".join(text.split())


def pgbench_steps(run: dict) -> list[dict]:
    return [s for s in run["steps"] if s["workload"] == "pgbench"]


def started(step: dict) -> datetime:
    return datetime.fromisoformat(step["started_at"])


def test_until_reaches_a_wide_width_with_the_targets_interleaved(
    howfast: Howfast, target_dir: Path, second_dir: Path
):
    plan = howfast.plan(PLAN)
    a, b = str(target_dir), str(second_dir)
    # A wide width, so that a loaded machine still reaches it within the maximum.
    out = howfast("run", str(plan), "--target", a, "--target", b, "--until", "ci=80%,max=12")
    assert out.returncode == 0, out.stderr
    assert "until ci=80%: 1 of 1 judged test(s) reached ±80%" in flat(out.stdout)
    assert "until ci=80%: pgbench select-only, 2 clients, 1 s:" in flat(out.stderr)  # at once
    run_id = out.stderr.split("run ")[-1].split()[0]
    run = json.loads(howfast("results", "show", run_id, "--json").stdout)

    # pgbench-init once per target, before any repetition
    inits = [s for s in run["steps"] if s["workload"] == "pgbench-init"]
    assert [s["target"] for s in inits] == [a, b]
    steps = pgbench_steps(run)
    assert max(map(started, inits)) < min(map(started, steps))
    # The order as stored, by start time: A B, B A, A B ...
    steps.sort(key=started)
    rounds = len(steps) // 2
    assert len(steps) == 2 * rounds and 3 <= rounds <= 12
    expected = [t for r in range(1, rounds + 1) for t in ([a, b] if r % 2 else [b, a])]
    assert [s["target"] for s in steps] == expected
    # Repetitions recorded like --repeat's, with the rule they ran under.
    for target in (a, b):
        mine = [s for s in steps if s["target"] == target]
        assert [s["params"].get("repetition", 1) for s in mine] == list(range(1, rounds + 1))
        assert all(s["params"]["until"]["ci"] == 0.8 for s in mine)

    until = run["until"]
    assert until["ci"] == 0.8 and until["min"] == 3 and until["max"] == 12
    assert until["reached"] is True
    (test,) = until["tests"]
    assert test["stopped"] == "reached" and test["repetitions"] == rounds
    assert [(f["target"], f["metric"], f["n"]) for f in test["figures"]] == [
        (a, "tps", rounds),
        (b, "tps", rounds),
    ]
    for figure in test["figures"]:
        assert figure["relative_half_width"] <= 0.8
        assert figure["ci_low"] < figure["mean"] < figure["ci_high"]
    # One round fewer would not have been enough (else the rule would have stopped there),
    # unless this is the minimum.
    if rounds > 3:
        assert any(
            _relative(s["metrics"]["tps"] for s in steps[: 2 * (rounds - 1)] if s["target"] == t)
            > 0.8
            for t in (a, b)
        )

    # compare on the run alone sets its targets side by side
    compared = howfast("compare", run_id, "--json")
    assert compared.returncode == 0, compared.stderr
    document = json.loads(compared.stdout)
    tps = next(m for t in document["tests"] if t["workload"] == "pgbench" for m in t["metrics"])
    difference = tps["differences"][1]
    said = difference["statement"]
    if difference["significant"]:
        assert said.startswith(f"{b} is ") and ", significant (" in said
    elif difference["within"] is not None:  # both asked 80%: the ratio's interval within it
        assert difference["within"] == 0.8
        assert said.startswith("no difference found within 80% (95% CI ")
        assert difference["ratio_ci_low"] >= 0.2 and difference["ratio_ci_high"] <= 1.8
    else:
        assert said.startswith(f"no significant difference: {b} is ")
    assert difference["ratio_ci_low"] < difference["ratio"] < difference["ratio_ci_high"]
    assert postgres_pids_under(target_dir) == [] and postgres_pids_under(second_dir) == []


def _relative(values) -> float:
    from howfast.analysis.stats import describe

    s = describe(list(values))
    return (s.ci_half or 0) / s.mean


# What is checked is where the run stops and what it says, not the figures: a short budget
# (every test still runs at least one round, docs/commands/run.md, which this test allows).
BUDGET_S = 12


def test_a_budget_stops_before_the_width_and_says_so(
    howfast: Howfast, target_dir: Path, second_dir: Path
):
    plan = howfast.plan(PLAN)
    a, b = str(target_dir), str(second_dir)
    began = time.monotonic()
    out = howfast(
        "run", str(plan), "--target", a, "--target", b,
        "--until", "ci=0.01%", "--budget", f"{BUDGET_S}s", "--json",
    )  # fmt: skip
    took = time.monotonic() - began
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    (test,) = run["until"]["tests"]
    assert test["stopped"] == "budget" and test["reached"] is False
    assert run["until"]["reached"] is False and run["until"]["budget_s"] == BUDGET_S
    assert 1 <= test["repetitions"] < 30
    assert all(f["reached"] is False for f in test["figures"])
    said = flat(out.stderr)  # the terminal wraps long lines
    assert "stopped: the time budget was spent" in said
    if test["repetitions"] >= 2:  # one repetition (a loaded machine) has no interval to show
        assert "±" in said
    # A round is not begun when it would end past the budget: the run ends near it (the
    # margin is for a loaded machine: starting and stopping two servers).
    assert took < BUDGET_S + 60
    shown = howfast("results", "show", run["id"])
    assert "stopped: the time budget was spent" in flat(shown.stdout)
    assert "NOT reached" in flat(shown.stdout)


def test_ctrl_c_keeps_the_completed_repetitions(
    howfast: Howfast, target_dir: Path, second_dir: Path
):
    plan = howfast.plan(PLAN)
    a, b = str(target_dir), str(second_dir)
    proc = howfast.popen("run", str(plan), "--target", a, "--target", b, "--until", "ci=0.01%")
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + 180
    while seen.count("completed: ") < 5 and time.monotonic() < deadline:  # 2 inits, 3 steps
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert seen.count("completed: ") >= 5, seen
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, rest
    listed = json.loads(howfast("results", "list", "--json").stdout)
    run = json.loads(howfast("results", "show", str(listed[0]["id"]), "--json").stdout)
    assert run["status"] == "aborted"
    steps = pgbench_steps(run)
    assert len([s for s in steps if s["status"] == "completed"]) >= 3
    assert run["until"]["tests"][0]["stopped"] == "interrupted"
    assert postgres_pids_under(target_dir) == [] and postgres_pids_under(second_dir) == []
    assert list(target_dir.iterdir()) == [] and list(second_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--until", "ci=2"], '--until: "ci=2": the width needs a %, e.g. ci=2%'),
        (["--until", "ci=0%"], "the width must be above 0%"),
        (["--until", "ci=-1%"], "the width must be above 0%"),
        (["--until", "ci=2%", "--budget", "10mn"], '--budget: "10mn" is not a duration'),
        (["--budget", "10m"], "--budget needs --until"),
        (["--until", "ci=2%,max=4", "--repeat", "5"], "max=4 is below the minimum of 5"),
    ],
)
def test_bad_values_are_clear_errors(howfast: Howfast, target_dir: Path, args, message):
    out = howfast("run", str(howfast.plan(PLAN)), "--target", str(target_dir), *args)
    assert out.returncode == 2
    assert message in out.stderr
    assert list(target_dir.iterdir()) == []


def test_dry_run_says_what_it_would_do(howfast: Howfast, target_dir: Path, second_dir: Path):
    plan = howfast.plan(PLAN)
    args = ["run", str(plan), "--target", str(target_dir), "--target", str(second_dir)]
    text = howfast(*args, "--until", "ci=2%", "--budget", "10m", "--repeat", "4", "--dry-run")
    assert text.returncode == 0, text.stderr
    assert "# --until ci=2%: each measuring test repeats, targets interleaved" in text.stdout
    assert "at least 4 and at most 30 times" in text.stdout and "10 min" in text.stdout
    document = json.loads(howfast(*args, "--until", "ci=2%", "--dry-run", "--json").stdout)
    assert document["until"]["ci"] == 0.02 and document["until"]["min"] == 3
    pgbench = [s for s in document["targets"][0]["steps"] if s["workload"] == "pgbench"]
    assert len(pgbench) == 3  # the first three rounds
    assert list(target_dir.iterdir()) == []


def test_a_directory_and_a_server_uri_interleaved(
    howfast: Howfast, target_dir: Path, pg_server: PgServer
):
    plan = howfast.plan(PLAN)
    a = str(target_dir)
    out = howfast(
        "run", str(plan), "--target", a, "--target", pg_server.dsn, "--yes",
        "--until", "ci=80%,max=8", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert PASSWORD not in out.stdout + out.stderr
    run = json.loads(out.stdout)
    server = run["targets"][1]["name"]
    assert run["targets"][1]["kind"] == "dsn"
    steps = sorted(pgbench_steps(run), key=started)
    rounds = len(steps) // 2
    assert [s["target"] for s in steps[:4]] == [a, server, server, a]
    (test,) = run["until"]["tests"]
    assert test["repetitions"] == rounds and test["stopped"] in ("reached", "maximum")
    assert {f["target"] for f in test["figures"]} == {a, server}
    assert postgres_pids_under(target_dir) == []


@pytest.mark.emulated
@pytest.mark.skipif(
    available().name is None, reason=f"no emulated volumes here: {available().reason}"
)
def test_emulated_variants_interleaved(howfast: Howfast, target_dir: Path):
    plan = howfast.plan(PLAN)
    out = howfast(
        "run", str(plan), "--target", str(target_dir), "--storage-latency", "0,1ms",
        "--storage-size", "256MiB", "--until", "ci=80%,max=6", "--json", timeout=400,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    fast, slow = (t["name"] for t in run["targets"])
    assert fast.endswith("+0ms") and slow.endswith("+1ms")
    steps = sorted(pgbench_steps(run), key=started)
    assert [s["target"] for s in steps[:4]] == [fast, slow, slow, fast]
    assert run["until"]["tests"][0]["stopped"] in ("reached", "maximum")
    assert postgres_pids_under(target_dir) == []
    assert list(target_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("plan", "target", "message"),
    [
        ("quick", "k8s://standard", "--until is not supported with k8s:// targets"),
        ("fleet", None, "--until does not apply to a [fleet] plan"),
        ("rate-curve", None, "--until cannot repeat a rate curve"),
    ],
)
def test_unsupported_combinations_are_refused(
    howfast: Howfast, target_dir: Path, plan: str, target: str | None, message: str
):
    out = howfast("run", plan, "--target", target or str(target_dir), "--until", "ci=2%")
    assert out.returncode == 2 and message in out.stderr
    assert list(target_dir.iterdir()) == []
    assert not howfast.store.exists()
