"""Dataset sizing against several memory sizes."""

from __future__ import annotations

import pytest

from howfast.errors import UsageError
from howfast.sizing import dataset_value, parse_dataset, plan_dataset
from howfast.units import format_bytes, parse_duration, parse_size, whole_seconds

MiB, GiB = 1024**2, 1024**3
PER_SCALE = 15_630_000  # ~15 MB per scale unit, as measured on PostgreSQL 15
BASE = 7_500_000


@pytest.mark.parametrize(
    ("memory", "shared_buffers"),
    [(1 * GiB, 128 * MiB), (16 * GiB, 4 * GiB), (256 * GiB, 64 * GiB), (64 * MiB, 16 * MiB)],
)
def test_regimes_land_where_they_promise(memory: int, shared_buffers: int):
    kw = {"memory_bytes": memory, "shared_buffers_bytes": shared_buffers,
          "bytes_per_scale": PER_SCALE, "base_bytes": BASE}  # fmt: skip
    in_buffers = plan_dataset("in-buffers", **kw)
    in_memory = plan_dataset("in-memory", **kw)
    on_disk = plan_dataset("on-disk", **kw)
    if shared_buffers > 2 * PER_SCALE:
        assert in_buffers.expected_bytes <= shared_buffers
    assert shared_buffers < in_memory.expected_bytes < memory
    assert on_disk.expected_bytes == pytest.approx(4 * memory, rel=0.05)
    assert in_buffers.scale <= in_memory.scale < on_disk.scale


def test_scale_follows_measured_size_per_unit():
    small = plan_dataset("on-disk", memory_bytes=GiB, shared_buffers_bytes=128 * MiB,
                         bytes_per_scale=PER_SCALE)  # fmt: skip
    big = plan_dataset("on-disk", memory_bytes=GiB, shared_buffers_bytes=128 * MiB,
                       bytes_per_scale=2 * PER_SCALE)  # fmt: skip
    assert small.scale == round(4 * GiB / PER_SCALE)
    assert abs(big.scale - small.scale / 2) <= 1  # twice the bytes per unit: half the scale


def test_explicit_size_and_tiny_sizes():
    plan = plan_dataset("size", explicit_bytes=20 * GiB, memory_bytes=GiB,
                        shared_buffers_bytes=128 * MiB, bytes_per_scale=PER_SCALE)  # fmt: skip
    assert plan.scale == round(20 * GiB / PER_SCALE)
    tiny = plan_dataset("in-buffers", memory_bytes=GiB, shared_buffers_bytes=8 * MiB,
                        bytes_per_scale=PER_SCALE)  # fmt: skip
    assert tiny.scale == 1  # never below 1


def test_in_memory_impossible_when_shared_buffers_too_large():
    with pytest.raises(UsageError, match="too large for the memory"):
        plan_dataset("in-memory", memory_bytes=GiB, shared_buffers_bytes=800 * MiB,
                     bytes_per_scale=PER_SCALE)  # fmt: skip


def test_parse_dataset():
    assert parse_dataset("on-disk") == ("on-disk", None)
    assert parse_dataset("20GiB") == ("size", 20 * GiB)
    with pytest.raises(UsageError, match="--dataset"):
        parse_dataset("huge")


def test_a_dataset_is_a_regime_or_a_size_as_written() -> None:
    assert dataset_value("on-disk") == "on-disk"
    assert dataset_value("20GiB") == "20GiB"
    with pytest.raises(ValueError, match='"20 apples": expected in-buffers, in-memory, on-disk'):
        dataset_value("20 apples")
    assert parse_dataset("20GiB") == ("size", 20 * GiB)
    with pytest.raises(UsageError, match="--dataset '0'"):
        parse_dataset("0")


def test_units_parse_and_print_without_the_plans() -> None:
    assert parse_duration("2m") == 120.0
    assert parse_size("64MiB", "--size") == 64 * MiB
    with pytest.raises(UsageError, match="--runtime: "):
        parse_duration("soon", "--runtime")
    assert whole_seconds(10.0) == 10.0
    with pytest.raises(ValueError, match=r"whole seconds, got 1\.5s"):
        whole_seconds(1.5)
    assert [format_bytes(n) for n in (512, 16 * MiB, 1536 * MiB)] == [
        "512 bytes",
        "16 MiB",
        "1.5 GiB",
    ]
