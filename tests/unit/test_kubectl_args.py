"""`kubectl howfast`: kubectl's -n/--namespace, --context and --kubeconfig on howfast's
command line (pure); the plugin through a real kubectl is in tests/integration/test_wheel.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.cli.kubectl_args import translate
from howfast.errors import UsageError

RUN = ["run", "quick", "--target", "k8s://fast", "--dry-run"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["-n", "bench"], ["--namespace", "bench"]),
        (["-nbench"], ["--namespace", "bench"]),
        (["-n=bench"], ["--namespace", "bench"]),
        (["--namespace", "bench"], ["--namespace", "bench"]),
        (["--namespace=bench"], ["--namespace", "bench"]),
        (["--context", "prod"], ["--kube-context", "prod"]),
        (["--context=prod"], ["--kube-context", "prod"]),
        (["--kube-context", "prod"], ["--kube-context", "prod"]),  # howfast's own: unchanged
    ],
)
def test_kubectl_flags_become_howfasts(given: list[str], expected: list[str]) -> None:
    translated = translate([*RUN, *given])
    assert translated.argv == [*RUN, *expected]
    assert translated.kubeconfig is None


def test_flags_anywhere_others_untouched_nothing_after_double_dash() -> None:
    argv = ["-n", "a", "run", "--set", "work_mem=4MB", "--context", "c", "--", "-n", "x"]
    assert translate(argv).argv == [
        "--namespace", "a", "run", "--set", "work_mem=4MB", "--kube-context", "c", "--", "-n", "x",
    ]  # fmt: skip


def test_kubeconfig_is_taken_out_and_made_absolute(tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "config"
    config.write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.chdir(tmp_path)
    for given in (["--kubeconfig", "config"], ["--kubeconfig=config"]):
        translated = translate([*RUN, *given])
        assert translated.argv == RUN
        assert translated.kubeconfig == str(config)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--context"], "--context needs a value"),
        (["-n", "--dry-run"], "-n needs a value"),
        (["--namespace="], "--namespace: empty value"),
        (["--kubeconfig", "/nonexistent/config"], "--kubeconfig /nonexistent/config: no such file"),
        (["--kubeconfig", "/"], "--kubeconfig /: is a directory"),
    ],
)
def test_bad_values_are_refused(given: list[str], said: str) -> None:
    with pytest.raises(UsageError) as raised:
        translate([*RUN, *given])
    assert said in str(raised.value)
