"""The delay plugin's live delay (targets/emulated/delay_plugin.py, `delay-file=`): its pure
parts, imported here with a stand-in for the `nbdkit` module, which exists only inside nbdkit
(the plugin itself runs under nbdkit in tests/integration/test_events.py's slow-storage test)."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

from howfast.targets.emulated.build import DELAY_PLUGIN, nbdkit_argv


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    monkeypatch.setitem(sys.modules, "nbdkit", types.ModuleType("nbdkit"))
    spec = importlib.util.spec_from_file_location("howfast_delay_plugin_test", DELAY_PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_delay_file_changes_the_delay_when_rewritten_looked_at_every_50_ms(
    plugin: types.ModuleType, tmp_path: Path
):
    delay_file = tmp_path / "delay-ms"
    plugin.config("file", str(tmp_path / "image"))
    plugin.config("delay-ms", "2")
    plugin.config("delay-file", str(delay_file))
    assert plugin.current_delay_s(100.0) == 0.002  # no file yet: delay-ms stays
    fresh = tmp_path / ".new"
    fresh.write_text("5.0\n")
    os.replace(fresh, delay_file)
    assert plugin.current_delay_s(100.01) == 0.002  # looked at 10 ms ago
    assert plugin.current_delay_s(100.06) == 0.005
    fresh.write_text("not a number")
    os.replace(fresh, delay_file)
    assert plugin.current_delay_s(100.2) == 0.005  # kept: no valid number
    fresh.write_text("0")
    os.replace(fresh, delay_file)
    assert plugin.current_delay_s(100.3) == 0.0


def test_the_file_accepts_only_milliseconds_in_the_plugins_bound(plugin: types.ModuleType):
    assert plugin.parse_delay_ms(" 0.25\n") == 0.25
    for text in ("-1", "nan", "inf", "1e9", ""):
        assert plugin.parse_delay_ms(text) is None


def test_nbdkit_is_given_the_delay_file():
    argv = nbdkit_argv(Path("/v/img"), Path("/r/s"), Path("/r/p"), 1.0, Path("/r/n"), Path("/r/d"))
    assert argv[-2:] == ["nodelay-file=/r/n", "delay-file=/r/d"]


def test_once_the_volume_goes_away_a_flush_waits_neither_the_delay_nor_the_disk(
    plugin: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Taken down (the nodelay file exists), a flush neither sleeps nor syncs the image to the
    storage under test: the image is deleted next, and on a busy disk the fdatasync alone
    could keep a Ctrl-C waiting."""
    image, nodelay = tmp_path / "image", tmp_path / "nodelay"
    image.write_bytes(b"\0" * 4096)
    plugin.config("file", str(image))
    plugin.config("delay-ms", "1000")
    plugin.config("nodelay-file", str(nodelay))
    synced: list[int] = []
    monkeypatch.setattr(plugin.os, "fdatasync", synced.append)
    h = plugin.open(False)
    try:
        plugin.config("delay-ms", "0")
        plugin.flush(h, 0)
        assert synced == [h]  # served: flushed to the storage under test
        plugin.config("delay-ms", "1000")
        nodelay.touch()
        plugin.flush(h, 0)  # would sleep 1 s and sync without the nodelay file
        assert synced == [h]
    finally:
        plugin.close(h)
