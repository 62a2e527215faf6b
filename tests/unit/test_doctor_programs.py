"""`howfast doctor` checks the programs the workloads declare (plugin/workload.py `programs`),
not a list of its own: a workload installed apart gets its programs checked too."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from howfast.machine.pgbin import INSTALL_HINT, find_installs
from howfast.plugin import registry
from howfast.service.doctor import all_checks

GADGET = """
from typing import Literal

from howfast.plugin.workload import Program, StepModel, WorkloadPlugin


class GadgetStep(StepModel):
    workload: Literal["gadget"]


class GadgetPlugin(WorkloadPlugin[GadgetStep]):
    name = "gadget"
    model = GadgetStep
    programs = (
        Program("true", "path", "gadget steps"),
        Program("howfast-no-such-gadget", "path", "gadget steps", hint="build the gadget"),
        Program("pg_no_such_gadget", "postgres", "gadget steps", required=True),
    )

    def expand(self, step, ctx):
        return ctx.repeated("gadget")

    def label(self, params):
        return "gadget"


PLUGIN = GadgetPlugin()
"""


def test_the_built_in_workloads_programs_are_checked_in_their_order() -> None:
    names = [c.name for c in all_checks()]
    if find_installs(None):
        assert names[1:4] == ["pgbench", "pg_test_fsync", "fio"], names
    else:  # no PostgreSQL here: only fio is looked for among the programs
        assert names[:2] == ["postgresql", "fio"], names


def test_a_workload_installed_apart_has_its_programs_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "howfast_gadget").mkdir()
    (tmp_path / "howfast_gadget" / "__init__.py").write_text("")
    (tmp_path / "howfast_gadget" / "plan.py").write_text(textwrap.dedent(GADGET))
    info = tmp_path / "howfast_gadget-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: howfast_gadget\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[howfast.workloads]\ngadget = howfast_gadget.plan:PLUGIN\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset()
    try:
        checks = {c.name: c for c in all_checks()}
    finally:
        monkeypatch.undo()
        registry.reset()
        sys.modules.pop("howfast_gadget.plan", None)
        sys.modules.pop("howfast_gadget", None)

    found = checks["true"]
    assert found.ok and found.detail.startswith(f"{shutil.which('true')} (")
    assert found.disables == "gadget steps" and not found.required
    missing = checks["howfast-no-such-gadget"]
    assert (missing.ok, missing.detail, missing.hint) == (False, "not found", "build the gadget")
    if find_installs(None):  # looked for in the PostgreSQL installation howfast uses
        in_install = checks["pg_no_such_gadget"]
        assert (in_install.ok, in_install.required) == (False, True)
        assert (in_install.disables, in_install.hint) == ("gadget steps", INSTALL_HINT)
    assert "true" not in {c.name for c in all_checks()}  # gone with the distribution
