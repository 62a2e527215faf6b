"""Which figure is PostgreSQL's own I/O (analysis/own_io.py): the cgroup's when it counted,
/proc/PID/io with the reason when it did not, and no neighbour blamed for an unknown."""

from __future__ import annotations

from typing import Any

from howfast.analysis.own_io import attribute_io, cgroup_problem
from howfast.iolimits import counting_line

MiB = 1 << 20


def _io(
    cgroup: dict[str, int] | None,
    proc: dict[str, int],
    *,
    version: str = "v1",
    device_write: int = 0,
    roles: dict[str, dict[str, int]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    pg: dict[str, Any] = {
        "source": f"cgroup {version} + /proc/PID/io" if cgroup is not None else "/proc/PID/io",
        "seconds": 10.0,
        "proc": proc,
        **extra,
    }
    if cgroup is not None:
        pg["cgroup_total"] = cgroup
        pg["roles"] = roles if roles is not None else {"data": dict(cgroup, write_ios=100)}
    return {"postgres": pg, "device_write": device_write}


def _attribute(io: dict[str, Any], wal: int | None = None) -> Any:
    device = {"io_data_write_bytes": io.pop("device_write")}
    found = attribute_io(io, wal, device)
    assert found is not None
    return found


def test_a_cgroup_that_counted_is_the_figure_per_device() -> None:
    found = _attribute(
        _io({"read_bytes": 0, "write_bytes": 12 * MiB}, {"read_bytes": 0, "write_bytes": 14 * MiB}),
        wal=6 * MiB,
    )
    assert found.metrics["pg_write_bytes"] == 12 * MiB
    assert found.metrics["pg_io_data_write_bytes"] == 12 * MiB
    assert found.metrics["pg_write_amplification"] == 2.0
    assert found.section["pg_io_source"] == "cgroup"
    assert "pg_io_unknown" not in found.section


def test_a_cgroup_at_zero_while_the_processes_wrote_is_not_counting() -> None:
    """The fresh-boot case of cgroup v1 on Linux 6.10+: the cgroup reads 0 whatever the server
    does. The figure comes from /proc/PID/io, says so, and is never 0."""
    found = _attribute(
        _io({"read_bytes": 0, "write_bytes": 0}, {"read_bytes": 0, "write_bytes": 40 * MiB}),
        wal=30 * MiB,
    )
    assert found.metrics["pg_write_bytes"] == 40 * MiB
    assert found.section["pg_io_source"] == "/proc/PID/io"
    assert "not counting" in str(found.section["pg_io_unknown"])
    assert not any(k.startswith("pg_io_data_") for k in found.metrics), found.metrics
    assert any("/proc/PID/io" in w for w in found.warnings)
    assert not any("something else used the disk" in w for w in found.warnings)


def test_the_sampler_saying_counting_is_off_is_believed_even_below_the_threshold() -> None:
    io = _io(
        {"read_bytes": 0, "write_bytes": 0},
        {"read_bytes": 0, "write_bytes": 4096},
        cgroup_counting=False,
        note="cannot turn cgroup v1 I/O counting on for 7:0: Invalid argument",
    )
    found = _attribute(io)
    assert found.metrics["pg_write_bytes"] == 4096
    assert "7:0" in str(found.section["pg_io_unknown"])


def test_a_cgroup_at_zero_beside_idle_processes_is_believed() -> None:
    """A step that did no I/O (select-only in memory): 0 is the measurement, not an unknown."""
    found = _attribute(
        _io({"read_bytes": 0, "write_bytes": 0}, {"read_bytes": 0, "write_bytes": 64 * 1024})
    )
    assert found.metrics["pg_write_bytes"] == 0
    assert cgroup_problem(_io({"read_bytes": 0, "write_bytes": 0}, {})["postgres"]) is None


def test_no_neighbour_is_blamed_for_the_kernels_writeback_of_the_servers_pages() -> None:
    """cgroup v1 leaves out the flusher's writeback: the device wrote 3x what the cgroup saw,
    but the server's processes dirtied more than half of it."""
    found = _attribute(
        _io(
            {"read_bytes": 0, "write_bytes": 30 * MiB},
            {"read_bytes": 0, "write_bytes": 80 * MiB},
            device_write=100 * MiB,
        )
    )
    assert found.metrics["pg_write_bytes"] == 30 * MiB
    assert not any("something else used the disk" in w for w in found.warnings)


def test_a_neighbour_that_wrote_far_more_than_the_server_dirtied_is_named() -> None:
    found = _attribute(
        _io(
            {"read_bytes": 0, "write_bytes": 30 * MiB},
            {"read_bytes": 0, "write_bytes": 40 * MiB},
            device_write=300 * MiB,
        )
    )
    assert any("something else used the disk" in w for w in found.warnings)


def test_cgroup_v2_counts_writeback_so_its_figure_alone_is_compared() -> None:
    found = _attribute(
        _io(
            {"read_bytes": 0, "write_bytes": 30 * MiB},
            {"read_bytes": 0, "write_bytes": 80 * MiB},
            version="v2",
            device_write=100 * MiB,
        )
    )
    assert any("something else used the disk" in w for w in found.warnings)


def test_counting_line_never_overwrites_a_rule_for_the_same_disk() -> None:
    assert counting_line("7:0", "") == "7:0 0"
    assert counting_line("7:0", "7:1 1048576\n") == "7:0 0"
    assert counting_line("7:0", "7:0 1048576\n") is None
