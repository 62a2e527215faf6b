"""Errors that reach the user as one line on stderr and a non-zero exit status."""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    OK = 0
    ERROR = 1  # a step or the run failed
    USAGE = 2  # bad input: arguments, plan, target
    CANNOT_JUDGE = 3  # compare --fail-if: too few repetitions to judge a threshold
    ABORTED = 130  # interrupted by SIGINT or SIGTERM


class HowfastError(Exception):
    """A failure explained in one line; `hint` says what to do about it."""

    exit_status = ExitStatus.ERROR

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(HowfastError):
    """The user's input is wrong: a path, a plan, an option."""

    exit_status = ExitStatus.USAGE


class PlanError(UsageError):
    """A plan file that does not validate; the message names file, key and line."""


class MissingToolError(HowfastError):
    """A program howfast needs is not installed."""


class Aborted(BaseException):
    """Raised in the main thread on SIGINT/SIGTERM. A BaseException, so that no
    `except Exception` swallows it."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
