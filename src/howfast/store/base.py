"""The Store interface: every backend (SQLite, PostgreSQL) implements these few methods."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from types import TracebackType

from howfast.model import JSONValue, RunRecord, RunSummary, StepRecord, TargetRecord

Columns = tuple[Sequence[float], Sequence[float]]  # a series' times, and its values


class Store(ABC):
    """Keeps runs, their targets and steps. Every write commits at once (a crash loses only
    the step in flight)."""

    @abstractmethod
    def create_run(
        self,
        plan: str,
        environment: dict[str, JSONValue],
        started_at: str,
        label: str | None = None,
        writer: dict[str, JSONValue] | None = None,
    ) -> int:
        """Create a run with status `running` and return its id; `writer` names the process
        that will finish it (store/liveness.py)."""

    @abstractmethod
    def add_target(self, run_id: int, target: TargetRecord) -> None:
        """Record a target of the run; targets keep the order they are added in."""

    @abstractmethod
    def update_target(self, run_id: int, target: TargetRecord) -> None:
        """Replace the stored record of the target with the same name (version, settings...)."""

    @abstractmethod
    def add_step(
        self,
        run_id: int,
        step: StepRecord,
        *,
        more_series: Mapping[str, Columns] | None = None,
    ) -> int:
        """Store a finished step with its series and histograms; return its id.
        `more_series` are series given as columns of times and values (an imported run's
        million points, held as arrays: too many to hold as Samples)."""

    @abstractmethod
    def add_run_environment(self, run_id: int, facts: Mapping[str, JSONValue]) -> None:
        """Add these keys to the run's environment (what a run was asked to judge itself
        by: `run --slo rto=...`), the ones already there kept."""

    @abstractmethod
    def finish_run(self, run_id: int, status: str, finished_at: str) -> None:
        """Set the final status: completed, failed or aborted."""

    @abstractmethod
    def running_runs(self) -> list[tuple[int, JSONValue]]:
        """(id, writer) of every run still marked `running`."""

    @abstractmethod
    def abandon_run(self, run_id: int) -> bool:
        """Mark a `running` run aborted, finished when its last stored step finished; False
        when it is not running (any more)."""

    @abstractmethod
    def list_runs(self) -> list[RunSummary]:
        """All runs, newest first."""

    @abstractmethod
    def get_run(self, run_id: int, *, with_series: bool = False) -> RunRecord | None:
        """One run with targets and steps; series and histograms only when asked for."""

    @abstractmethod
    def delete_run(self, run_id: int) -> bool:
        """Delete a run and everything under it; False when there was no such run."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
