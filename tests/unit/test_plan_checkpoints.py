"""The `checkpoints` built-in plan and per-step settings: the plan format's `settings` table
on a pgbench step, and how the runner applies it before that step and only for it."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest

from howfast.errors import HowfastError, PlanError
from howfast.hosts.base import Host
from howfast.hosts.local import LocalHost
from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue, StepRecord, StepSpec, TargetRecord
from howfast.observer import StepRef
from howfast.plans import Overrides, builtin_plan_text, effective_settings, expand, load_plan
from howfast.plans.load import key_lines, parse_plan
from howfast.runner import Runner, RunSettings
from howfast.store import open_store
from howfast.targets.base import PlannedTarget, Target
from howfast.targets.capabilities import AppliesStepSettings
from howfast.workloads.base import StepContext, StepOutcome, Workload
from howfast.workloads.pgbench.workload import PgbenchWorkload


def tpcb(settings: dict[str, str]) -> StepSpec:
    params: dict[str, JSONValue] = {
        "mode": "tpcb-like",
        "clients": 8,
        "jobs": None,
        "duration_s": 120,
        "scale": 50,
        "settings": settings,
    }
    return StepSpec("pgbench", params)


# --- the built-in plan ------------------------------------------------------------------------


def test_checkpoints_runs_tpcb_like_twice_with_two_completion_targets() -> None:
    plan = load_plan("checkpoints")
    assert plan.name == "checkpoints"
    init = StepSpec(
        "pgbench-init", {"scale": 50, "generate": "client", "fillfactor": 100, "partitions": 0}
    )
    assert expand(plan) == [
        init,
        tpcb({"checkpoint_completion_target": "0.5"}),
        tpcb({"checkpoint_completion_target": "0.9"}),
    ]
    settings = effective_settings(plan)
    assert settings["max_wal_size"] == "64MB"  # small, so that checkpoints happen
    assert "checkpoint_completion_target" not in settings  # it is each step's own


def test_checkpoints_text_is_commented_toml_that_loads_as_a_user_file(tmp_path: Path) -> None:
    text = builtin_plan_text("checkpoints")
    assert text.startswith("# checkpoints: ")
    assert "How long:" in text
    assert tomllib.loads(text)["description"] == load_plan("checkpoints").description
    copy = tmp_path / "mine.toml"
    copy.write_text(text)
    assert expand(load_plan(str(copy))) == expand(load_plan("checkpoints"))
    lines = key_lines(text)
    assert text.splitlines()[lines[("steps", 2, "settings")] - 1].startswith("settings = {")


def test_overrides_keep_each_steps_settings() -> None:
    specs = expand(load_plan("checkpoints"), Overrides(clients=[1, 2], duration_s=10, repeat=2))
    measured = [s for s in specs if s.workload == "pgbench"]
    assert [(s.params["clients"], s.params["settings"], s.repetition) for s in measured] == [
        (c, {"checkpoint_completion_target": v}, r)
        for v in ("0.5", "0.9")
        for c in (1, 2)
        for r in (1, 2)
    ]
    measured[0].params["settings"]["x"] = "1"  # type: ignore[index]
    assert "x" not in measured[1].params["settings"]  # type: ignore[operator]


# --- the format -------------------------------------------------------------------------------

STEP = """
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [4]
duration = "30s"
"""


def test_settings_as_a_sub_table_with_typed_and_dotted_values() -> None:
    text = STEP + (
        "[steps.settings]\n"
        "checkpoint_completion_target = 0.9\n"
        "Full_Page_Writes = false\n"
        "max_wal_size = 64\n"
        "auto_explain.log_min_duration = '1s'\n"
    )
    [spec] = expand(parse_plan(text, source="p.toml"))
    assert spec.params["settings"] == {
        "checkpoint_completion_target": "0.9",
        "full_page_writes": "off",
        "max_wal_size": "64",
        "auto_explain.log_min_duration": "1s",
    }


def test_a_step_without_settings_records_none() -> None:
    [spec] = expand(parse_plan(STEP, source="p.toml"))
    assert "settings" not in spec.params


def test_a_bad_setting_names_the_key_and_line() -> None:
    text = STEP + 'settings = { checkpoint_completion_target = [1], "bad name" = 1 }\n'
    with pytest.raises(PlanError) as caught:
        parse_plan(text, source="p.toml")
    message = str(caught.value)
    assert "p.toml:7: steps[0].settings" in message
    assert "not a PostgreSQL setting name" in message


def test_settings_belong_to_pgbench_steps() -> None:
    text = '[[steps]]\nworkload = "fio"\nprofiles = ["wal-fsync"]\nsettings = { fsync = "off" }\n'
    with pytest.raises(PlanError, match="unknown key for a fio step"):
        parse_plan(text, source="p.toml")


def test_the_step_label_shows_its_settings() -> None:
    params: dict[str, JSONValue] = {
        "mode": "tpcb-like",
        "clients": 8,
        "duration_s": 120,
        "settings": {"checkpoint_completion_target": "0.5"},
    }
    label = PgbenchWorkload().label(params)
    assert label == "pgbench tpcb-like, 8 clients, 120 s, checkpoint_completion_target=0.5"


# --- the runner applies them ------------------------------------------------------------------


class SettingsTarget(Target, AppliesStepSettings):
    """Records what the runner asks it to apply; `fail`: the server refuses a setting."""

    kind = "fake"

    def __init__(self, fail: bool = False) -> None:
        self.name = "fake"
        self.fail = fail
        self.applied: list[dict[str, str]] = []

    def check(self, *, will_init: bool) -> None: ...
    def start(self) -> None: ...
    def record(self) -> TargetRecord:
        return TargetRecord(name=self.name, kind=self.kind)

    def stop(self) -> None: ...

    def host(self) -> Host:
        return LocalHost()

    def planned(self) -> PlannedTarget:
        return PlannedTarget(self.host(), None, None)

    def apply_step_settings(self, settings: Mapping[str, str]) -> None:
        if self.fail:
            raise HowfastError("setting fsync = 'maybe' refused: invalid value")
        self.applied.append(dict(settings))


class KeepsItsSettings(Target):
    """A server that is not howfast's: without AppliesStepSettings, as a dsn target."""

    kind = "dsn"
    name = "existing"

    def check(self, *, will_init: bool) -> None: ...
    def start(self) -> None: ...
    def record(self) -> TargetRecord:
        return TargetRecord(name=self.name, kind=self.kind)

    def stop(self) -> None: ...

    def host(self) -> Host:
        return LocalHost()

    def planned(self) -> PlannedTarget:
        return PlannedTarget(self.host(), None, None)


class Quiet:
    def run_started(self, *args: object) -> None: ...
    def step_started(self, *args: object) -> None: ...
    def step_progress(self, *args: object) -> None: ...
    def step_finished(self, *args: object) -> None: ...
    def message(self, text: str) -> None: ...


class Nothing(Workload):
    name = "pgbench"

    def label(self, params: dict[str, JSONValue]) -> str:
        return "nothing"

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        return StepOutcome(metrics={"tps": 1.0})


class DiskFull(Nothing):
    """Fails like a workload whose directory filled up: with an OSError."""

    def execute(self, ctx: StepContext, params: dict[str, JSONValue]) -> StepOutcome:
        raise OSError(28, "No space left on device")


def run(
    target: Target,
    specs: list[StepSpec],
    tmp_path: Path,
    monkeypatch,
    workloads: list[Workload] | None = None,
) -> list:
    queue = list(workloads or [])
    monkeypatch.setattr(
        "howfast.runner.target_session.get_workload",
        lambda name: queue.pop(0) if queue else Nothing(),
    )
    with open_store(str(tmp_path / "r.db")) as store:
        settings = RunSettings(
            store,
            specs,
            plan_name="t",
            install=PgInstall(bindir=tmp_path, version="15", source="test"),
            observer=Quiet(),
        )
        runner = Runner(settings, [target], sample_interval_s=None)
        result = runner.execute()
        stored = store.get_run(result.run_id)
    assert stored is not None
    steps: list[StepRecord] = stored.steps
    return steps


def spec(settings: dict[str, str] | None = None) -> StepSpec:
    params: dict[str, JSONValue] = {"mode": "tpcb-like", "clients": 1, "duration_s": 1}
    if settings is not None:
        params["settings"] = settings
    return StepSpec("pgbench", params)


def test_settings_are_applied_before_their_step_and_undone_after(tmp_path, monkeypatch) -> None:
    target = SettingsTarget()
    half, most = {"checkpoint_completion_target": "0.5"}, {"checkpoint_completion_target": "0.9"}
    steps = run(target, [spec(), spec(half), spec(half), spec(), spec(most)], tmp_path, monkeypatch)
    # Nothing before the first step, once for two steps in a row, back to the plan's after,
    # and at the end, so that a kept cluster has the plan's settings.
    assert target.applied == [half, {}, most, {}]
    assert [s.status for s in steps] == ["completed"] * 5
    assert steps[1].params["settings"] == half
    assert all(s.warnings == [] for s in steps)


def test_a_target_that_keeps_its_settings_runs_the_step_with_a_warning(
    tmp_path, monkeypatch
) -> None:
    target = KeepsItsSettings()
    off = {"fsync": "off"}
    steps = run(target, [spec(off), spec(off), spec()], tmp_path, monkeypatch)
    assert [s.status for s in steps] == ["completed"] * 3
    for step in steps[:2]:  # each step that has settings says so, repetitions too
        assert step.all_params["settings_applied"] is False
        assert step.warnings == [
            "the step's settings were not applied: dsn targets keep their own settings"
        ]
    assert "settings_applied" not in steps[2].params and steps[2].warnings == []


def test_settings_the_server_refuses_fail_that_step_only(tmp_path, monkeypatch) -> None:
    target = SettingsTarget(fail=True)
    steps = run(target, [spec({"fsync": "maybe"}), spec()], tmp_path, monkeypatch)
    assert [s.status for s in steps] == ["failed", "completed"]
    assert "refused: invalid value" in (steps[0].error or "")


def test_an_os_error_in_a_step_fails_that_step_only(tmp_path, monkeypatch) -> None:
    steps = run(SettingsTarget(), [spec(), spec()], tmp_path, monkeypatch, [DiskFull()])
    assert [s.status for s in steps] == ["failed", "completed"]
    assert steps[0].error == "pgbench step: [Errno 28] No space left on device"


class Recording(Quiet):
    """Keeps every step event, to check which target and step each is about."""

    def __init__(self) -> None:
        self.events: list[tuple[str, StepRef]] = []

    def step_started(self, step: StepRef, expected_s: float | None) -> None:  # type: ignore[override]
        self.events.append(("started", step))

    def step_finished(self, step: StepRef, record: StepRecord) -> None:  # type: ignore[override]
        self.events.append(("finished", step))


def test_step_events_say_which_target_and_which_step(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("howfast.runner.target_session.get_workload", lambda name: Nothing())
    first, second = SettingsTarget(), SettingsTarget()
    first.name, second.name = "disk-a", "disk-b"
    observer = Recording()
    with open_store(str(tmp_path / "r.db")) as store:
        settings = RunSettings(
            store,
            [spec(), spec()],
            plan_name="t",
            install=PgInstall(bindir=tmp_path, version="15", source="test"),
            observer=observer,
        )
        Runner(settings, [first, second], sample_interval_s=None).execute()
    seen = [(kind, ref.target, ref.index, ref.total) for kind, ref in observer.events]
    assert seen == [
        ("started", "disk-a", 0, 4),
        ("finished", "disk-a", 0, 4),
        ("started", "disk-a", 1, 4),
        ("finished", "disk-a", 1, 4),
        ("started", "disk-b", 2, 4),
        ("finished", "disk-b", 2, 4),
        ("started", "disk-b", 3, 4),
        ("finished", "disk-b", 3, 4),
    ]
    assert {ref.label for _, ref in observer.events} == {"nothing"}
