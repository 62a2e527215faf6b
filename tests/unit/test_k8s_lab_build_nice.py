"""The lab build's priority (tests/k8s/lab/config.build_nice): nice 10 by default, what
scripts/test.sh asks for there (0: the build is a fresh run's critical path)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.k8s.lab import config


@pytest.mark.parametrize(
    ("value", "prefix"),
    [(None, ["nice", "-n", "10"]), ("0", ["nice", "-n", "0"]), ("-5", ["nice", "-n", "-5"]),
     ("", ["nice", "-n", "10"]), ("fast", ["nice", "-n", "10"])],
)  # fmt: skip
def test_the_build_runs_at_nice_10_unless_told(
    monkeypatch: pytest.MonkeyPatch, value: str | None, prefix: list[str]
) -> None:
    if value is None:
        monkeypatch.delenv(config.BUILD_NICE_ENV, raising=False)
    else:
        monkeypatch.setenv(config.BUILD_NICE_ENV, value)
    assert config.build_nice() == prefix


def test_test_sh_runs_the_build_at_the_lab_sessions_priority() -> None:
    script = (Path(__file__).resolve().parents[2] / "scripts" / "test.sh").read_text()
    (line,) = [x for x in script.splitlines() if "-m tests.k8s.lab build" in x]
    assert line.startswith(f'{config.BUILD_NICE_ENV}=0 "${{SESSION_NICE[@]}}"')
    # the lane that owns the lab runs at that same priority
    (owner,) = [x for x in script.splitlines() if "HOWFAST_K8S_LAB_LANE=owner" in x]
    assert owner.rstrip(")").endswith('"${SESSION_NICE[@]}"'), owner
    # the prefix it gets really runs a command at that increment
    out = subprocess.run([*config.build_nice(), "nice"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().lstrip("-").isdigit()
