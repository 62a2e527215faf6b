"""Executes the steps of a plan on each target, in three parts:

- run.py: the run (validation, the run row, signals, finish);
- target_session.py: one target (open: start; run_step: per-step settings and a step; close:
  stop);
- step.py: one step (prepare, sample, execute, store);
- interleaved.py: an `--until` run: every target open at once, tests repeated in rounds that
  alternate the targets until the stopping rule (analysis/until.py) says enough.

Events to the user interface (howfast/observer.py) carry which target and which step they
are about (StepRef), and cancellation is a token (signals.SignalGuard.cancel) that every tool
watches, so target sessions can be open side by side.
"""

from howfast.runner.run import Runner, RunResult, RunSettings

__all__ = ["RunResult", "RunSettings", "Runner"]
