"""One discovery for every kind of plug-in (plugin/discovery.py): workloads, samplers, target
kinds and event actions are found in their package and in their entry-point group, and two of
one name are refused with both origins named. The distributions here are real dist-info
directories on sys.path, as installing a wheel leaves them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import howfast.events as events_package
from howfast.errors import HowfastError
from howfast.events import registry as events
from howfast.plugin import registry as workloads
from howfast.samplers import registry as samplers
from howfast.targets import registry as kinds


def distribution(root: Path, name: str, group: str, *entries: str) -> None:
    """An installed distribution as Python finds one on sys.path."""
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "\n".join(entries)
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}\n")


def _forget() -> None:
    workloads.reset()
    samplers.sampler_plugins.cache_clear()
    kinds.kinds.cache_clear()
    events.reset()


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """install(group, *entries): a distribution declaring them, found from now on."""

    def install(group: str, *entries: str) -> None:
        distribution(tmp_path, "howfast_extra", group, *entries)
        monkeypatch.syspath_prepend(str(tmp_path))
        _forget()

    try:
        yield install
    finally:
        monkeypatch.undo()
        _forget()
        for name in [m for m in sys.modules if m.startswith("tests.toy_sampler")]:
            sys.modules.pop(name)


ORIGIN = "entry point twice = {} of distribution howfast_extra"


@pytest.mark.parametrize(
    ("group", "value", "find", "message"),
    [
        (
            "howfast.workloads",
            "howfast.workloads.fio.plan:PLUGIN",
            workloads.plugins,
            "workload 'fio' is defined twice: by module howfast.workloads.fio.plan and by ",
        ),
        (
            "howfast.samplers",
            "howfast.samplers.cpu:SAMPLER",
            samplers.sampler_plugins,
            "sampler 'cpu' is defined twice: by module howfast.samplers.cpu and by ",
        ),
        (
            "howfast.targets",
            "howfast.targets.kinds.dsn:KIND",
            kinds.kinds,
            "target kind 'dsn' is defined twice: by module howfast.targets.kinds.dsn and by ",
        ),
        (
            "howfast.events",
            "howfast.events.crash:ACTION",
            events.actions,
            "event action 'crash' is defined twice: by module howfast.events.crash and by ",
        ),
    ],
)
def test_a_name_twice_is_refused_naming_both_origins(
    installed: Callable[..., None], group: str, value: str, find: Callable[[], object], message: str
) -> None:
    installed(group, f"twice = {value}")
    with pytest.raises(HowfastError) as raised:
        find()
    assert str(raised.value) == message + ORIGIN.format(value)


def test_two_event_modules_of_one_name_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events' registry had no duplicate check before it shared the discovery."""
    (tmp_path / "crash_again.py").write_text(
        "from howfast.events.crash import Crash\n\nACTION = Crash()\n"
    )
    monkeypatch.setattr(events_package, "__path__", [*events_package.__path__, str(tmp_path)])
    events.reset()
    try:
        with pytest.raises(HowfastError, match=r"event action 'crash' is defined twice: by "
                           r"module howfast\.events\.crash and by module "
                           r"howfast\.events\.crash_again$"):  # fmt: skip
            events.actions()
    finally:
        monkeypatch.undo()
        events.reset()
        sys.modules.pop("howfast.events.crash_again", None)
    assert "crash" in events.actions()


def test_an_entry_point_that_is_not_a_plugin_is_refused(installed: Callable[..., None]) -> None:
    installed("howfast.samplers", "sep = os:sep")
    with pytest.raises(HowfastError, match="sampler plug-in entry point sep = os:sep of "
                       "distribution howfast_extra is not a SamplerPlugin: '/'"):  # fmt: skip
        samplers.sampler_plugins()


def test_a_sampler_installed_apart_watches_the_sampled_workloads(
    installed: Callable[..., None],
) -> None:
    before = [s.name for s in samplers.samplers_for("pgbench")]
    installed("howfast.samplers", "loadavg = tests.toy_sampler.sampler:SAMPLER")
    assert [s.name for s in samplers.samplers_for("pgbench")] == [*before, "loadavg"]  # order 90
    assert "loadavg" in [s.name for s in samplers.samplers_for("fio")]
    assert "loadavg" not in [s.name for s in samplers.samplers_for("pgbench-init")]  # not sampled
