"""An event action added as one module and nothing else (issue 36): tests/toy_event/action.py,
installed as a distribution installs a plug-in (a dist-info with an entry point in the
`howfast.events` group, on PYTHONPATH), is parsed, listed in `--event`'s help and the
grammar's messages, checked against a target that lacks its capability (refused in its own
words), and run end to end by `howfast run` on a real local target (a throwaway PostgreSQL
cluster in a directory): applied during the pgbench step's load, verified, stored."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from howfast.events import checks
from howfast.events import registry as events
from howfast.plugin import events as declared
from howfast.targets.dsn import DsnTarget
from tests.conftest import shared_tmpdir
from tests.toy_workload.test_toy_workload import Howfast

ENTRY_POINT = "toy-analyze = tests.toy_event.action:ACTION"


def install(site: Path) -> None:
    """What installing a distribution that declares the toy event leaves on the path."""
    info = site / "howfast_toy_event-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: howfast-toy-event\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[howfast.events]\n{ENTRY_POINT}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The toy event installed, for this process (its registries forgotten around it)."""
    install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    events.reset()
    try:
        yield tmp_path / "site"
    finally:
        monkeypatch.undo()
        events.reset()


def test_an_installed_action_is_parsed_listed_and_checked(site: Path) -> None:
    spec = declared.parse_event("2s:toy-analyze")
    assert (spec.action, spec.arg, spec.text) == ("toy-analyze", None, "2s:toy-analyze")
    # its syntax, as it declares it: no value, no for=
    with pytest.raises(ValueError, match=r"toy-analyze takes no value; write toy-analyze$"):
        declared.event_from_text("2s:toy-analyze=t")
    with pytest.raises(ValueError, match="toy-analyze takes no option"):
        declared.event_from_text("2s:toy-analyze,for=3s")
    # listed after the built-in actions (its order, 200), in the help and in messages
    assert declared.event_help().endswith(
        "drain=NODE[,for=D], toy-analyze (repeatable; docs/events.md)."
    )
    with pytest.raises(ValueError, match=r"did you mean \"toy-analyze\"\?.*toy-analyze$"):
        declared.event_from_text("2s:toy-analyse")
    assert not declared.disturbs_service("toy-analyze")
    # what it needs of a target, in its own words
    dsn = DsnTarget("postgresql://app@db.example/app", name="postgresql://db.example/app")
    assert checks.refusals(dsn, [spec]) == [
        "postgresql://db.example/app: event 2s:toy-analyze: toy-analyze needs "
        "a server whose identity howfast reads (a directory target), and an existing server "
        "(a postgresql:// URI) is not one"
    ]
    assert "toy-analyze" in events.actions()


@pytest.mark.integration
def test_an_installed_action_runs_end_to_end(site: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the server runs as its own OS user")
    base = shared_tmpdir("howfast-toy-event-")
    target = base / "bench"
    target.mkdir()
    target.chmod(0o755)
    howfast = Howfast(tmp_path / "results.db", tmp_path, site)
    try:
        out = howfast("run", "quick", "--target", str(target), "--clients", "1",
                      "--modes", "select-only", "--duration", "6s", "--scale", "1",
                      "--rate", "200",  # the event, not throughput
                      "--event", "2s:toy-analyze", "--json")  # fmt: skip
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    (step,) = [s for s in doc["steps"] if s["workload"] == "pgbench"]
    assert step["status"] == "completed", step["error"]
    assert step["params"]["events"] == ["2s:toy-analyze"]
    (event,) = step["events"]
    assert event["action"] == "toy-analyze"
    assert event["verified"] is True, event["problem"]
    after, before = (
        event["evidence"]["analyze_count_after"],
        event["evidence"]["analyze_count_before"],
    )
    assert after > (before or 0)
    assert "2s:toy-analyze applied" in out.stderr
    shown = howfast("results", "show", str(doc["id"]))
    assert shown.returncode == 0, shown.stderr
    assert "2s:toy-analyze" in shown.stdout
    helped = howfast("run", "--help")
    # click wraps the help at spaces and after hyphens ("cap-" / "iops")
    unwrapped = " ".join(helped.stdout.split()).replace("- ", "-")
    assert "drain=NODE[,for=D], toy-analyze (repeatable" in unwrapped, helped.stdout
