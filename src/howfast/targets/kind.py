"""What a target kind is (TargetKind), the options it declares (OptionSpec) and the run
options every kind may use (TargetOptions): the interface each module of targets/kinds/
implements, apart from the registry that finds them (targets/registry.py).

A kind says everything about its `--target` texts that the CLI and the service would
otherwise decide by kind: which texts are its own, its own command-line options (declared
here as data, turned into click options by the CLI), whether a run needs PostgreSQL's
programs on this machine, what it refuses (`--until`, a fleet), its doctor checks, the
housekeeping before a run, its probe target and its fleet place.

    kind = kind_for(text)                                          # registry.py
    parsed = kind.parse_options({"namespace": "bench", ...}, OptionContext("run", texts))
    targets = kind.create(text, TargetOptions(install, kind_options={kind.name: parsed}))
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from howfast.design import DesignOptions
from howfast.errors import UsageError
from howfast.redact import redact_dsn

if TYPE_CHECKING:
    from howfast.checks import Check
    from howfast.machine.pgbin import PgInstall
    from howfast.plans.model import Plan
    from howfast.targets.base import Target
    from howfast.targets.fleet_base import FleetPlace

Command = Literal["run", "probe"]
LocalInstall = Literal["server", "client", "none"]


@dataclass(frozen=True)
class OptionSpec:
    """One command-line option of a kind. No click here: the CLI makes the option from it,
    and hands the value back, a string or None when not given, under `name`."""

    name: str  # the value's key: "namespace"
    flag: str  # "--namespace"
    metavar: str  # "NS"
    help: str
    commands: frozenset[Command] = frozenset({"run", "probe"})  # where the option exists


@dataclass(frozen=True)
class OptionContext:
    """What a kind's parse_options may read besides its own options' values."""

    command: Command
    targets: tuple[str, ...] = ()  # every --target text of the command (of any kind)
    memory_bytes: int | None = None  # --memory (or the plan's memory)
    plan: Plan | None = None  # the plan, for a section a kind owns ([storage])


@dataclass(frozen=True)
class RunShape:
    """What a run asks beyond its targets, that a kind may refuse before anything runs."""

    until: bool = False  # --until: every target's session open at once, interleaved
    fleet: bool = False  # a [fleet] plan
    dry_run: bool = False


@dataclass(frozen=True)
class TargetOptions:
    """The `howfast run` / `howfast probe` options a target may use; each kind refuses the
    ones it cannot. `kind_options` holds what each kind's parse_options returned, by kind
    name (K8sOptions under "k8s", DirectoryOptions under "local")."""

    install: PgInstall
    wal_dir: Path | None = None
    settings: dict[str, str] = field(default_factory=dict)
    keep: bool = False
    overwrite: bool = False
    checksums: bool = False
    memory_limit: int | None = None
    kind_options: Mapping[str, object] = field(default_factory=dict)
    # --replicas, --sync, --standby-dir (and the plan's [design]): the design of every
    # target that does not say otherwise in its own text (`DIR?replicas=1`); each kind
    # refuses what it cannot build
    design: DesignOptions = field(default_factory=DesignOptions)


class TargetKind(ABC):
    """One kind of `--target`. Subclass, set the class attributes, implement `matches` and
    `create`; override the rest where the kind differs from the defaults."""

    name: str  # the `kind` of the targets it makes: local, dsn, k8s
    order: int = 100  # tried in this order; the first that matches makes the target
    usage: str = ""  # how to write one, for the message about a text no kind matches
    # Its options, and whom they are for: "--namespace: for k8s:// targets only"
    options: tuple[OptionSpec, ...] = ()
    option_scope: str = ""
    # What of PostgreSQL a run needs on this machine: "server" (initdb, postgres: the kind
    # makes clusters here), "client" (pgbench, psql: the server is elsewhere), "none" (every
    # tool runs elsewhere, in a pod). A run needs the most any of its targets needs.
    local_install: LocalInstall = "server"
    # How a fleet on this kind is given, for the message that lists the kinds that hold
    # one ("" when it holds none): "a directory (its instances live in subdirectories of it)"
    fleet_usage: str = ""
    fleet_example: str = ""  # "--target DIR"
    # The design keys (design.py) its targets take, as run options (--replicas...) or in
    # their text (`?replicas=1`); the others are refused (refuse_design)
    design_keys: frozenset[str] = frozenset()

    @abstractmethod
    def matches(self, text: str) -> bool:
        """Whether `text` (a --target argument) names a target of this kind."""

    def parse_options(self, values: Mapping[str, str | None], ctx: OptionContext) -> object | None:
        """Its options' values (None: not given) as the typed object its `create` reads
        from TargetOptions.kind_options; None when the command has no target of this kind.
        Called for every kind (whether or not one of the targets is of it), so that options
        given without a target of the kind are refused here: UsageError."""
        if not any(self.matches(text) for text in ctx.targets):
            refuse_unused(self, values)
            return None
        return None

    @abstractmethod
    def create(self, text: str, options: TargetOptions) -> list[Target]:
        """The targets `text` names (several: variants of one directory on emulated volumes,
        side by side); UsageError when an option does not apply to this kind."""

    def probe_target(self, text: str, options: TargetOptions) -> Target:
        """What `howfast probe TEXT` measures: storage only, no server."""
        raise UsageError(f"howfast probe measures storage: it cannot probe {self.usage}")

    def fleet(self, text: str, options: TargetOptions, *, planned: bool = False) -> FleetPlace:
        """Where a [fleet] plan's instances live on this target (`planned`: for --dry-run,
        nothing claimed). The registry refuses the kinds without `fleet_usage` before."""
        raise UsageError(f"a fleet cannot run on {self.usage}")

    def refuse_design(self, text: str, design: DesignOptions) -> None:
        """UsageError for the run's design options (--replicas, --sync...) that this kind's
        target `text` cannot take; called before create()."""
        refused = [key for key in design.given() if key not in self.design_keys]
        if refused:
            flags = ", ".join(f"--{key.replace('_', '-')}" for key in refused)
            raise UsageError(f"{flags}: not for {redact_dsn(text)} ({self.usage}) yet")

    def refuse(self, shape: RunShape) -> None:
        """UsageError for what a run asks that this kind cannot do (before anything runs)."""
        del shape  # a kind refuses nothing unless it says so

    def doctor_checks(self) -> list[Check]:
        """What `howfast doctor` checks for targets of this kind (the cluster, cgroups...)."""
        return []

    def housekeeping(self) -> list[str]:
        """Tidying before a run that creates targets of this kind (empty cgroups a killed
        howfast left): what was done, one line each."""
        return []


def refuse_unused(kind: TargetKind, values: Mapping[str, str | None]) -> None:
    """UsageError when one of `kind`'s options was given: the command has no target of it."""
    given = sorted(o.name for o in kind.options if values.get(o.name) is not None)
    if given:
        flags = ", ".join(o.flag for name in given for o in kind.options if o.name == name)
        raise UsageError(f"{flags}: for {kind.option_scope or kind.usage} only")
