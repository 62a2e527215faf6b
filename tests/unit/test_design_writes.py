"""The standbys' devices as roles of their own (issue 28 item 2): which source counts each
standby's writes in the design's bytes written, and the primary's sums leave them out."""

from __future__ import annotations

from typing import Any

from howfast.analysis.derive import derive_step
from howfast.analysis.design_writes import own_device, standby_writes
from howfast.machine.devices import assign
from howfast.model import StepRecord
from howfast.samplers.session import _roles_section

MIB = 1 << 20


def _delta(written_bytes: int) -> dict[str, int]:
    return {"reads": 0, "reads_merged": 0, "sectors_read": 0, "read_ms": 0,
            "writes": max(1, written_bytes // 8192), "writes_merged": 0,
            "sectors_written": written_bytes // 512, "write_ms": 10, "io_ms": 10,
            "weighted_ms": 10, "flushes": 5, "flush_ms": 1}  # fmt: skip


def _own(written_bytes: int) -> dict[str, Any]:
    """A server's own I/O in the server-I/O sampler's shape (its cgroup counted)."""
    return {"source": "cgroup v2 + /proc/PID/io", "seconds": 4.0,
            "cgroup_total": {"read_bytes": 0, "write_bytes": written_bytes, "read_ios": 0,
                             "write_ios": 10},
            "proc": {"read_bytes": 0, "write_bytes": written_bytes}}  # fmt: skip


def _step(roles: dict[str, Any], standbys: dict[str, Any]) -> StepRecord:
    return StepRecord(
        "/mnt/a", "pgbench", {"mode": "tpcb-like", "clients": 1, "scale": 1}, "completed",
        "2026-11-26T01:00:00Z", "2026-11-26T01:00:04Z",
        metrics={"tps": 250.0, "transactions": 1000},
        sections={"io": {"roles": roles, "postgres": _own(30 * MIB), "standbys": standbys},
                  "postgres": {"wal_bytes": 10 * MIB,
                               "replication": {"source": "pg_stat_replication",
                                               "standbys": {n: {} for n in standbys}}}},
    )  # fmt: skip


def test_a_standby_on_a_device_of_its_own_is_counted_by_its_device() -> None:
    roles = {
        "data": {"device": "vda", "seconds": 4.0, "delta": _delta(40 * MIB)},
        "wal": {"device": "vda", "same_device_as": "data"},
        "standby_1": {"device": "loop7", "standby": "standby_1", "seconds": 4.0,
                      "delta": _delta(12 * MIB)},
    }  # fmt: skip
    step = derive_step(_step(roles, {"standby_1": _own(10 * MIB)}), [])
    m = step.metrics
    assert m["standby_write_bytes"] == 12 * MIB  # the volume's, journal included
    assert m["design_write_bytes"] == 30 * MIB + 12 * MIB
    assert m["design_write_bytes_per_tx"] == round(42 * MIB / 1000, 1)
    assert step.sections["io"]["standby_writes"]["standby_1"] == {
        "write_bytes": 12 * MIB, "source": "device", "device": "loop7"}  # fmt: skip
    # The standby's device has its own figures, outside the primary's sums
    assert m["io_standby_1_write_bytes"] == 12 * MIB
    assert step.sections["io"]["device_write_bytes"] == 40 * MIB
    assert m["io_write_amplification"] == 4.0
    # ...and is no reason to say someone else used the primary's disk
    assert not [w for w in step.warnings if "something else" in w]


def test_a_standby_on_the_primarys_device_is_counted_by_its_processes_once() -> None:
    roles = {
        "data": {"device": "vda", "seconds": 4.0, "delta": _delta(40 * MIB)},
        "wal": {"device": "vda", "same_device_as": "data"},
        "standby_1": {"device": "vda", "same_device_as": "data", "standby": "standby_1"},
    }
    step = derive_step(_step(roles, {"standby_1": _own(10 * MIB)}), [])
    m = step.metrics
    assert m["standby_write_bytes"] == 10 * MIB
    assert m["design_write_bytes"] == 40 * MIB
    assert step.sections["io"]["device_write_bytes"] == 40 * MIB  # the device counted once
    assert "io_standby_1_write_bytes" not in m
    source = step.sections["io"]["standby_writes"]["standby_1"]
    assert source["source"] == "processes" and "on the device of data (vda)" in source["why"]


def test_two_standbys_on_one_device_are_each_counted_by_their_processes() -> None:
    """standby_1's device holds standby_2 too: its counters are both standbys'."""
    roles = {
        "data": {"device": "vda", "seconds": 4.0, "delta": _delta(40 * MIB)},
        "standby_1": {"device": "vdb", "standby": "standby_1", "seconds": 4.0,
                      "delta": _delta(25 * MIB)},
        "standby_2": {"device": "vdb", "same_device_as": "standby_1", "standby": "standby_2"},
    }  # fmt: skip
    found = standby_writes(roles, {"standby_1": _own(11 * MIB), "standby_2": _own(12 * MIB)})
    assert found is not None
    writes, warnings = found
    assert writes == {
        "standby_1": {"write_bytes": 11 * MIB, "source": "processes",
                      "why": "standby_2 on its device (vdb) too"},
        "standby_2": {"write_bytes": 12 * MIB, "source": "processes",
                      "why": "on the device of standby_1 (vdb)"},
    }  # fmt: skip
    assert warnings == []


def test_a_device_another_writer_used_gives_way_to_the_standbys_own_writes() -> None:
    roles = {"standby_1": {"device": "vdb", "standby": "standby_1", "seconds": 4.0,
                           "delta": _delta(200 * MIB)}}  # fmt: skip
    found = standby_writes(roles, {"standby_1": _own(10 * MIB)})
    assert found is not None
    writes, warnings = found
    assert writes["standby_1"] == {"write_bytes": 10 * MIB, "source": "processes",
                                   "why": f"its device (vdb) wrote {200 * MIB} bytes, the "
                                          f"standby itself {10 * MIB}: something else wrote "
                                          "there"}  # fmt: skip
    assert len(warnings) == 1 and warnings[0].startswith("standby_1: its device (vdb)")
    # Less than twice its own is the standby's volume (its journal, metadata)
    roles["standby_1"]["delta"] = _delta(19 * MIB)
    assert standby_writes(roles, {"standby_1": _own(10 * MIB)}) == (
        {"standby_1": {"write_bytes": 19 * MIB, "source": "device", "device": "vdb"}},
        [],
    )


def test_unaccounted_standbys_give_no_total() -> None:
    # its device not read, its processes unknown
    roles = {"standby_1": {"device": "vdb", "standby": "standby_1"}}
    assert standby_writes(roles, {}) is None
    assert own_device(roles, "standby_1") == (None, None, "its device (vdb) was not read twice")
    # its own device known, its processes not sampled (the standby-io sampler failed)
    roles["standby_1"].update(seconds=4.0, delta=_delta(8 * MIB))
    assert standby_writes(roles, {}) == (
        {"standby_1": {"write_bytes": 8 * MIB, "source": "device", "device": "vdb"}},
        [],
    )


def test_the_roles_section_names_a_standbys_role_and_the_device_it_shares() -> None:
    roles = assign([("data", "/a/data", "vda", "ext4", None),
                    ("wal", "/a/data/pg_wal", "vda", "ext4", None),
                    ("standby_1", "/a/standby_1/data", "vda", "ext4", None),
                    ("standby_2", "/b/data", "loop3", "ext4", "vda")])  # fmt: skip
    sampled = {"data": {"seconds": 1.0, "delta": _delta(MIB)},
               "standby_2": {"seconds": 1.0, "delta": _delta(MIB)}}  # fmt: skip
    section = _roles_section(roles, sampled, frozenset({"standby_1", "standby_2"}))
    assert section["standby_1"] == {"path": "/a/standby_1/data", "device": "vda",
                                    "fstype": "ext4", "same_device_as": "data",
                                    "standby": "standby_1"}  # fmt: skip
    assert section["standby_2"]["standby"] == "standby_2" and "delta" in section["standby_2"]
    assert "standby" not in section["data"] and "standby" not in section["wal"]


def test_a_standbys_device_is_no_sign_that_someone_else_used_the_primarys() -> None:
    """The primary's own writes are compared with its devices only: a busy standby volume
    beside them is not 'something else used the disk'."""
    roles = {
        "data": {"device": "vda", "seconds": 4.0, "delta": _delta(40 * MIB)},
        "standby_1": {"device": "loop7", "standby": "standby_1", "seconds": 4.0,
                      "delta": _delta(70 * MIB)},
    }  # fmt: skip
    step = derive_step(_step(roles, {"standby_1": _own(40 * MIB)}), [])
    assert step.metrics["standby_write_bytes"] == 70 * MIB
    assert not [w for w in step.warnings if "something else used" in w], step.warnings
    roles["data"]["delta"] = _delta(110 * MIB)  # the primary's device itself: said
    step = derive_step(_step(roles, {"standby_1": _own(40 * MIB)}), [])
    assert [w for w in step.warnings if "something else used" in w]
