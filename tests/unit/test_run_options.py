"""Options as objects (issue 36 item 4): click's keyword arguments gathered into one frozen
dataclass (cli/options.py `gathered`), and `run`'s parsed into the service's typed request
(cli/run.py `run_request_of`), without running anything."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from howfast.cli.context import CliEnv, pass_env
from howfast.cli.options import gathered
from howfast.cli.run import RunOptions, run_request_of
from howfast.errors import UsageError


@dataclasses.dataclass(frozen=True)
class ToyOptions:
    size: int
    names: tuple[str, ...]
    kind_given: Mapping[str, str | None]


def test_gathered_passes_one_frozen_value_and_keeps_the_other_options_by_name() -> None:
    seen: list[ToyOptions] = []

    @click.command()
    @click.option("--size", type=int, default=1)
    @click.option("--name", "names", multiple=True)
    @click.option("--namespace")  # one a target kind would declare
    @pass_env
    @gathered(ToyOptions)
    def toy(env: CliEnv, options: ToyOptions) -> int:
        """The toy's help."""
        seen.append(options)
        return 0

    result = CliRunner().invoke(toy, ["--size", "3", "--name", "a", "--name", "b"])
    assert result.exit_code == 0, result.output
    assert seen == [ToyOptions(3, ("a", "b"), {"namespace": None})]
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen[0].size = 4  # type: ignore[misc]
    assert "The toy's help." in CliRunner().invoke(toy, ["--help"]).output


def given(**changed: object) -> RunOptions:
    """`howfast run`'s options as click gives them when none is given."""
    defaults = {f.name: None for f in dataclasses.fields(RunOptions)}
    defaults.update(
        plan="quick", targets=("/mnt/a",), sets=(), standby_dirs=(), events=(),
        keep=False, dry_run=False, yes=False, checksums=False, in_cluster=False,
        as_json=False, sample_interval="1s", kind_given={},
    )  # fmt: skip
    return RunOptions(**{**defaults, **changed})  # type: ignore[arg-type]


def test_run_options_become_the_typed_request() -> None:
    request = run_request_of(
        given(
            clients="1,4",
            duration="30s",
            sets=("work_mem=64MB",),
            memory="1GiB",
            replicas=1,
            sync="remote_write",
            standby_dirs=(Path("/mnt/b"),),
            yes=True,
            sample_interval="0",
            until="ci=2%",
            metrics_port=0,
        )
    )
    assert request.plan == "quick" and request.targets == ("/mnt/a",)
    assert request.overrides.clients == [1, 4] and request.overrides.duration_s == 30
    assert request.overrides.settings == {"work_mem": "64MB"}
    assert request.target_options.memory_bytes == 1024**3
    assert request.target_options.overwrite is True  # --yes
    design = request.target_options.design
    assert design.replicas == 1 and design.sync == "remote_write"
    assert design.standby_dirs == (Path("/mnt/b"),)
    assert request.sampling.interval_s is None  # 0: no sampling
    assert request.until.until == "ci=2%" and request.live_metrics.port == 0


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"clients": "x"}, "--clients"),
        ({"duration": "soon"}, "--duration"),
        ({"rates": "fast"}, "--rates"),
        ({"memory": "lots"}, "--memory"),
        ({"standby_latency": "far"}, "--standby-latency"),
        ({"sample_interval": "10ms"}, "--sample-interval"),
    ],
)
def test_a_bad_value_names_its_option(changed: dict[str, object], named: str) -> None:
    with pytest.raises(UsageError, match=named):
        run_request_of(given(**changed))


@pytest.mark.parametrize("name", ["run", "probe"])
def test_every_option_of_run_and_probe_is_a_field_or_a_target_kinds_own(name: str) -> None:
    # An option added to the command without its field would land in `kind_given`, unread.
    from howfast.cli.probe import ProbeOptions, probe_command
    from howfast.cli.run import run_command
    from howfast.targets.registry import kind_options

    command, options = {"run": (run_command, RunOptions), "probe": (probe_command, ProbeOptions)}[
        name
    ]
    fields = {f.name for f in dataclasses.fields(options)} - {"kind_given"}
    kinds = {spec.name for _, spec in kind_options(name)}  # type: ignore[arg-type]
    params = {p.name for p in command.params}
    assert params - kinds == fields and not fields & kinds
