"""Checkpoint lines of the server log of PostgreSQL 15, 16 and 17, and pairing them into
events on the step's time line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from howfast.samplers.checkpoints import Seen, log_time, pair, parse_line, unfinished

DATA = Path(__file__).parent.parent / "data" / "checkpoints"


def entries(name: str):
    lines = (DATA / name).read_text().splitlines()
    return [e for e in (parse_line(line) for line in lines) if e is not None]


def test_pg15_recorded_lines() -> None:
    found = entries("pg15-recorded.log")
    assert len(found) == 24
    assert [e.kind for e in found[:2]] == ["starting", "complete"]
    assert found[0].flags == ("wal",)
    assert found[-2].flags == ("immediate", "force", "wait")
    done = found[-1].figures
    assert done == {
        "buffers": 956,
        "buffers_pct": 11.7,
        "wal_files_added": 0,
        "wal_files_removed": 0,
        "wal_files_recycled": 0,
        "write_s": 0.017,
        "sync_s": 0.015,
        "total_s": 0.034,
        "sync_files": 4,
        "sync_longest_s": 0.014,
        "sync_average_s": 0.004,
        "distance_kb": 9044,
        "estimate_kb": 17367,
    }
    assert found[-1].wall == datetime(2026, 11, 22, 11, 17, 5, 968000, tzinfo=UTC).timestamp()


def test_pg16_lines_in_a_zone_without_offset_have_no_time() -> None:
    found = entries("pg16-constructed.log")
    assert [e.kind for e in found] == ["starting", "complete"] * 3
    assert [e.flags for e in found[::2]] == [("time",), ("wal",), ("immediate", "force", "wait")]
    assert found[1].figures["buffers"] == 2712 and found[3].figures["wal_files_added"] == 1
    assert all(e.wall is None for e in found)  # CET: not turned into a guessed offset


def test_pg17_lines_add_the_checkpoint_and_redo_lsn() -> None:
    found = entries("pg17-constructed.log")
    done = found[1].figures
    assert done["lsn"] == "0/9A3C2D8" and done["redo_lsn"] == "0/8F1B2C0"
    assert done["buffers"] == 4316 and done["total_s"] == 11.607
    assert found[0].wall is not None


def test_other_lines_and_other_complete_messages_are_ignored() -> None:
    assert parse_line("2026-01-01 00:00:00.000 UTC [1] LOG:  database system is ready") is None
    assert parse_line("LOG:  redo done at 0/1000; checkpoint complete: nothing") is None
    restart = parse_line("LOG:  restartpoint starting: time")
    assert restart is not None and restart.restartpoint and restart.wall is None


AT = datetime(2026, 11, 22, 11, 17, 5, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("2026-11-22 11:17:05 UTC [1] LOG: x", AT),
        ("2026-11-22 13:17:05.5 +02 [1] LOG: x", AT + 0.5),
        ("2026-11-22 06:47:05.000 -0430 [1] LOG: x", AT),
        ("2026-11-22 11:17:05.000 GMT [1] LOG: x", AT),
    ],
)
def test_log_time_with_utc_or_a_numeric_offset(line: str, expected: float) -> None:
    assert log_time(line) == expected


def test_log_time_without_a_usable_prefix() -> None:
    assert log_time("LOG:  checkpoint starting: time") is None
    assert log_time("2026-11-22 11:17:05.000 CEST [1] LOG: x") is None


def test_pairing_on_the_step_time_line() -> None:
    found = entries("pg17-constructed.log")
    # The step started 5 s after the first checkpoint began; times from each line's stamp.
    start = (found[0].wall or 0) + 5.0
    seen = [Seen(e, (e.wall or 0) - start) for e in found]
    events = pair(seen, step_end=45.0)
    assert [e["reason"] for e in events] == ["wal", "wal", "requested"]
    first = events[0]
    assert first["start_t"] == -5.0  # began before the step
    assert first["end_t"] == pytest.approx(6.607)
    assert first["in_step_s"] == pytest.approx(6.607)  # only its part inside the step
    assert first["buffers"] == 4316
    assert events[2]["flags"] == ["immediate", "force", "wait"]


def test_a_checkpoint_still_running_at_the_end_and_one_without_its_start() -> None:
    found = entries("pg15-recorded.log")
    events = pair([Seen(found[1], 0.5), Seen(found[2], 3.0)], step_end=10.0)
    assert events[0]["start_t"] is None and events[0]["end_t"] == 0.5
    assert events[0]["in_step_s"] == 0.5
    assert events[1]["end_t"] is None and events[1]["in_step_s"] == 7.0


def test_the_checkpoint_running_when_the_step_starts_is_found_in_the_log_tail() -> None:
    lines = (DATA / "pg15-recorded.log").read_text().splitlines()
    assert unfinished(lines) is None  # the log ends with a completed checkpoint
    running = unfinished(lines[:-1])
    assert running is not None and running.flags == ("immediate", "force", "wait")
