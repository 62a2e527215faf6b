"""The samplers of a step start and stop side by side (samplers/session.py `side_by_side`):
on a pod each waits on the API server, and one after the other they held the step up."""

from __future__ import annotations

import threading

import pytest

from howfast.samplers.session import side_by_side

WAIT_S = 10.0  # only bounds a failure: each call sets what the other waits for


def test_the_calls_run_at_once_and_their_results_come_in_order() -> None:
    first, second = threading.Event(), threading.Event()

    def a() -> str:
        first.set()
        return f"a saw b: {second.wait(WAIT_S)}"

    def b() -> str:
        second.set()
        return f"b saw a: {first.wait(WAIT_S)}"

    # one after the other, a would wait for b for WAIT_S and see False
    assert side_by_side([a, b]) == ["a saw b: True", "b saw a: True"]
    assert side_by_side([]) == []


def test_what_a_call_raised_is_raised_once_the_others_ended() -> None:
    ended = threading.Event()

    def fails() -> None:
        raise RuntimeError("broken sampler")

    def slow() -> None:
        threading.Event().wait(0.2)
        ended.set()

    with pytest.raises(RuntimeError, match="broken sampler"):
        side_by_side([fails, slow])
    assert ended.is_set()
