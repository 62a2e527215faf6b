"""Each event action declares itself (issue 36): its syntax, its one-line summary and its entry
in docs/events.md, and what it does to the primary; the parser, `--event`'s help and the
failover rule are derived from those declarations, so they cannot drift from the modules."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from howfast.events import checks
from howfast.events.registry import actions
from howfast.plugin.events import action_syntaxes, event_help, parse_event

ROOT = Path(__file__).resolve().parents[2]


def test_every_built_in_action_has_a_summary_and_a_row_in_its_docs_entry() -> None:
    for name, action in actions().items():
        assert action.summary, name
        path, _, anchor = action.docs.partition("#")
        text = (ROOT / path).read_text()
        headings = {
            re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.+)$", text, re.M)
        }
        assert anchor in headings, (name, action.docs)
        assert f"| `{name}" in text, f"docs/events.md's table has no row for {name}"


def test_the_help_lists_every_action_in_its_declared_order() -> None:
    usages = [s.usage for s in sorted(action_syntaxes().values(), key=lambda s: s.order)]
    listed = event_help().partition(": ")[2].removesuffix(" (repeatable; docs/events.md).")
    assert listed.split(", ") == usages
    # today's wording, kept (issue 36: the help was written by hand before)
    assert event_help() == (
        "During every pgbench step, at AT into its load: checkpoint, restart, crash, "
        "exec=ARGV, slow-storage=LATENCY[,for=D], cap-iops=N[,for=D], failover[=STANDBY], "
        "partition[=STANDBY][,for=D], switchover[=STANDBY], delete-pod, move[=NODE], "
        "drain=NODE[,for=D] (repeatable; docs/events.md)."
    )


def test_the_failover_rule_comes_from_what_the_actions_declare() -> None:
    on_old = {n for n, a in actions().items() if a.on_old_primary}
    # partition: after a failover no standby is left to cut off (issue 38)
    assert on_old == {
        "restart", "crash", "cap-iops", "slow-storage", "failover", "partition", "switchover",
    }  # fmt: skip
    replaces = {n for n, a in actions().items() if a.replaces_primary}
    assert replaces == {"failover", "switchover"}
    after = [parse_event(t) for t in ("5s:failover", "6s:checkpoint", "7s:restart", "8s:exec=true")]
    assert checks.after_failover(after) == [
        "event 7s:restart: after a failover the old primary is gone and no standby is left: "
        "restart cannot follow it in the same step"
    ]


def test_finding_the_actions_loads_no_driver_and_no_heavy_library() -> None:
    # `howfast run` finds every action to write --event's help, and planning or reading a run
    # with events finds them for their syntax: an action module imports its database driver
    # and the Kubernetes client where it uses them, not at its top.
    script = (
        "import sys\n"
        "from howfast.plugin.events import event_help\n"
        "event_help()\n"
        "print(' '.join(m for m in sys.modules if '.' not in m))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = set(done.stdout.split())
    heavy = {"psycopg", "kubernetes", "numpy", "scipy", "plotly", "matplotlib"}
    assert loaded & heavy == set()
