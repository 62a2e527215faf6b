"""Executes the steps of a plan on each target, in three parts:

- run.py: the run (validation, the run row, signals, finish);
- target_session.py: one target (start, per-step settings, the step loop, stop);
- step.py: one step (prepare, sample, execute, store).

Events to the user interface carry which target and which step they are about
(observer.StepRef), and cancellation is a token (signals.SignalGuard.cancel) that every tool
watches, so target sessions could later run side by side without another redesign.
"""

from howfast.clock import now
from howfast.runner.observer import RunObserver, StepRef
from howfast.runner.run import Runner, RunResult

__all__ = ["RunObserver", "RunResult", "Runner", "StepRef", "now"]
