"""The memory datasets are sized for: --memory, a container's cgroup limit, or RAM; and the
smallest --memory cap a server's settings allow."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.errors import UsageError
from howfast.machine.memory import (
    MEMORY_HEADROOM,
    MemoryBasis,
    cap_problem,
    choose_basis,
    inherited_limit_bytes,
    mem_total_bytes,
    parse_limit,
    pg_memory_bytes,
    v1_hierarchical_limit,
)
from howfast.machine.pgbin import PgInstall
from howfast.targets.kind import TargetOptions
from howfast.targets.registry import make_targets

GIB = 1024**3
MIB = 1024**2


def test_parse_limit():
    assert parse_limit("max\n") is None
    assert parse_limit("9223372036854771712\n") is None  # v1's "no limit"
    assert parse_limit("1073741824\n") == GIB
    assert parse_limit("") is None


def test_v1_limit_comes_from_the_hierarchical_figure():
    stat = "cache 123\nhierarchical_memory_limit 2147483648\nhierarchical_memsw_limit 1\n"
    assert v1_hierarchical_limit(stat) == 2 * GIB
    assert v1_hierarchical_limit("hierarchical_memory_limit 9223372036854771712\n") is None


def test_inherited_limit_v2_takes_the_smallest_of_the_ancestors(tmp_path: Path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    parent = tmp_path / "kubepods" / "pod1"
    own = parent / "ctr"
    own.mkdir(parents=True)
    (tmp_path / "kubepods" / "memory.max").write_text("max\n")
    (parent / "memory.max").write_text(f"{4 * GIB}\n")
    (own / "memory.max").write_text(f"{8 * GIB}\n")
    assert inherited_limit_bytes(tmp_path, "0::/kubepods/pod1/ctr\n") == 4 * GIB
    (parent / "memory.max").write_text("max\n")
    (own / "memory.max").write_text("max\n")
    assert inherited_limit_bytes(tmp_path, "0::/kubepods/pod1/ctr\n") is None


def test_inherited_limit_v1_and_in_a_cgroup_namespace(tmp_path: Path):
    own = tmp_path / "memory" / "docker" / "abc"
    own.mkdir(parents=True)
    (own / "memory.stat").write_text(f"hierarchical_memory_limit {GIB}\n")
    assert inherited_limit_bytes(tmp_path, "4:memory:/docker/abc\n") == GIB
    # Inside a namespace the path names a cgroup that is the mount's root.
    (tmp_path / "memory" / "memory.stat").write_text(f"hierarchical_memory_limit {2 * GIB}\n")
    assert inherited_limit_bytes(tmp_path, "4:memory:/elsewhere\n") == 2 * GIB


@pytest.mark.parametrize(
    ("cap", "ram", "inherited", "expected"),
    [
        (GIB, 64 * GIB, 8 * GIB, MemoryBasis(GIB, "--memory")),
        (None, 64 * GIB, 8 * GIB, MemoryBasis(8 * GIB, "cgroup")),
        (None, 64 * GIB, 128 * GIB, MemoryBasis(64 * GIB, "ram")),
        (None, 64 * GIB, None, MemoryBasis(64 * GIB, "ram")),
        (None, None, None, None),
    ],
)
def test_choose_basis(cap, ram, inherited, expected):
    assert choose_basis(cap, ram, inherited) == expected


def test_describe_and_meminfo():
    assert MemoryBasis(64 * MIB, "--memory").describe() == "64 MiB (the --memory cap)"
    assert MemoryBasis(24 * GIB, "ram").describe() == "24.00 GiB (RAM)"
    assert mem_total_bytes("MemTotal:       24684084 kB\nMemFree: 1 kB\n") == 24684084 * 1024


def test_pg_memory_bytes_reads_postgresql_units():
    assert pg_memory_bytes("128MB") == 128 * MIB
    assert pg_memory_bytes("1GB") == GIB
    assert pg_memory_bytes("16384") == 128 * MIB  # shared_buffers: 8 kB pages
    assert pg_memory_bytes("65536", 1024) == 64 * MIB  # maintenance_work_mem: kB
    assert pg_memory_bytes("10mb") is None  # PostgreSQL's units are case-sensitive


def test_cap_must_hold_shared_buffers_maintenance_work_mem_and_the_processes():
    # Defaults: 128 MB + 64 MB + headroom.
    assert "at least 224 MiB" in (cap_problem(64 * MIB, {}) or "")
    assert cap_problem(224 * MIB, {}) is None
    small = {"shared_buffers": "16MB", "maintenance_work_mem": "8MB"}
    assert cap_problem(16 * MIB + 8 * MIB + MEMORY_HEADROOM, small) is None
    assert cap_problem(48 * MIB, small) is not None


def test_memory_is_refused_for_a_server_uri_before_connecting():
    install = PgInstall(bindir=Path("/nonexistent"), version="15", source="test")
    with pytest.raises(UsageError, match="--memory applies to directory targets only"):
        make_targets(["postgresql://u@127.0.0.1:1/db"], TargetOptions(install, memory_limit=GIB))
