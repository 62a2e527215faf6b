"""What a cut pgbench segment says, read from real pgbench 15 outputs (tests/data/pgbench,
README "Segments of a surviving load"): both abort forms, the acknowledged count after an
abort, why a segment never ran, and where a builtin script's END is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from howfast.workloads.pgbench.segments import Abort, final_command, parse_aborts, parse_segment
from howfast.workloads.pgbench.survive import SegmentRun

DATA = Path(__file__).parents[1] / "data" / "pgbench"
STATUSES = json.loads((DATA / "segments-pg15.json").read_text())


def recorded(name: str, returncode: int | None = None) -> SegmentRun:
    out = DATA / f"segment-{name}-pg15.out"
    return SegmentRun(
        number=1,
        seconds=6,
        started_epoch=100.0,
        ended_epoch=102.5,
        returncode=STATUSES[name]["returncode"] if returncode is None else returncode,
        stdout=out.read_text() if out.exists() else "",
        stderr=(DATA / f"segment-{name}-pg15.err").read_text(),
    )


@pytest.mark.parametrize(
    ("name", "acked", "aborts"),
    [
        # 4 clients, 1 thread: three in the query form, one in the connection-gone form
        ("restart", 1771, [(0, 9), (2, 5), (3, 8), (1, 6)]),
        ("restart-j2", 1152, [(0, 6), (1, 4)]),
        ("crash", 1514, [(0, 4), (1, 8)]),
    ],
)
def test_a_segment_cut_by_the_server_keeps_its_acknowledged_count_and_names_each_abort(
    name, acked, aborts
):
    segment = parse_segment(recorded(name))
    assert segment.returncode == 2  # pgbench's status when a client aborted
    assert segment.ran and segment.acked == acked
    assert [(a.client, a.command) for a in segment.aborts] == aborts
    assert segment.failed == 0 and segment.connect_error is None


def test_both_abort_forms_give_the_client_the_command_and_the_reason():
    query_form, gone_form = parse_aborts(
        (DATA / "segment-restart-pg15.err").read_text()
    )[:2]  # fmt: skip
    assert query_form == Abort(
        0, 9, 0, "FATAL:  terminating connection due to administrator command"
    )
    assert gone_form == Abort(2, 5, 0, "connection gone")
    crash = parse_aborts((DATA / "segment-crash-pg15.err").read_text())
    assert {a.reason for a in crash} == {"connection gone"}


def test_clients_cut_in_their_commit_are_found_in_either_form():
    in_doubt = parse_segment(recorded("restart-in-doubt", returncode=2))
    assert in_doubt.acked == 2331
    assert [(a.client, a.command) for a in in_doubt.aborts] == [(1, 5), (0, 10)]
    end_query = parse_aborts((DATA / "segment-restart-end-query-pg15.err").read_text())
    assert [(a.client, a.command) for a in end_query] == [(0, 4), (2, 6), (3, 10), (1, 6)]


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("refused", "failed: No such file or directory"),
        ("recovering", "failed: FATAL:  the database system is starting up"),
    ],
)
def test_a_segment_that_could_not_connect_never_ran_and_says_why(name, says):
    segment = parse_segment(recorded(name))
    assert segment.returncode == 1
    assert not segment.ran and segment.acked is None and segment.aborts == ()
    assert segment.connect_error is not None
    assert segment.connect_error.startswith("connection to server on socket")
    assert segment.connect_error.endswith(says)


def test_a_segment_with_no_output_at_all_says_its_status():
    segment = parse_segment(SegmentRun(3, 4, 1.0, 1.1, 127, "", "sh: pgbench: not found\n"))
    assert segment.connect_error == "pgbench exited with status 127"


@pytest.mark.parametrize(
    ("mode", "end"), [("tpcb-like", 10), ("simple-update", 8), ("select-only", None)]
)
def test_the_end_of_each_builtin_script_is_where_pgbench_counts_it(mode, end):
    assert final_command((DATA / f"show-script-{mode}-pg15.txt").read_text()) == end
