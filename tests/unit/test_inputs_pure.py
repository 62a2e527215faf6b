"""The pure helpers behind issue 26's input checks: printable text, path values, memory
sizes, a key set twice in a plan, a step's error as tables show it."""

from __future__ import annotations

from pathlib import Path

import pytest

from howfast.cli.options import MAX_RUN_ID, parse_run_id, path_problem
from howfast.errors import PlanError
from howfast.errortext import error_summary
from howfast.machine.memory import (
    MemoryBasis,
    cap_floor_problem,
    shared_memory_problem,
)
from howfast.plans.load import overwritten_key, parse_plan
from howfast.printable import printable
from howfast.targets.userpaths import created_by_howfast, howfast_directory_around
from howfast.units import human_bytes


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain label", "plain label"),
        ("é ü 日本 🙂", "é ü 日本 🙂"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("bell\x07", "bell\\x07"),
        ("two\nlines", "two\\nlines"),
        ("back\rwards", "back\\rwards"),
        ("del\x7f", "del\\x7f"),
        ("c1\x9b", "c1\\x9b"),
        ("rtl\u202eoverride", "rtl\\u202eoverride"),
        ("line\u2028sep", "line\\u2028sep"),
    ],
)
def test_printable(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_keeps_what_it_is_asked_to() -> None:
    assert printable("a\n\tb\x1b", keep="\n\t") == "a\n\tb\\x1b"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("   ", "only blanks"),
        ("\t", "only blanks"),
        ("/mnt/a\nb", "control character (\\n at character 7)"),
        ("/mnt/\x1b[31m", "control character (\\x1b at character 6)"),
    ],
)
def test_path_problem(text: str, problem: str) -> None:
    found = path_problem(text)
    assert found is not None and problem in found


@pytest.mark.parametrize("text", ["/mnt/a", "relative/dir", " leading space", "dir with space"])
def test_paths_that_are_fine(text: str) -> None:
    assert path_problem(text) is None


def test_run_ids_up_to_sqlite_integers() -> None:
    import click

    assert parse_run_id(str(MAX_RUN_ID)) == 2**63 - 1
    with pytest.raises(click.BadParameter, match="run ids go up to"):
        parse_run_id(str(MAX_RUN_ID + 1))


@pytest.mark.parametrize(
    ("n", "shown"),
    [(0, "0 bytes"), (1000, "1000 bytes"), (1024, "1 KiB"), (300 * 1024, "300 KiB"),
     (224 * 2**20, "224 MiB"), (3 * 2**30 // 2, "1.50 GiB")],
)  # fmt: skip
def test_human_bytes_never_says_zero_mib(n: int, shown: str) -> None:
    assert human_bytes(n) == shown


def test_memory_floor() -> None:
    problem = cap_floor_problem(1024, "--memory")
    assert problem is not None and "--memory 1 KiB is too small" in problem and "64 MiB" in problem
    assert cap_floor_problem(64 * 2**20, "--memory") is None


def test_shared_memory_against_the_basis() -> None:
    ram = MemoryBasis(8 * 2**30, "ram")
    problem = shared_memory_problem("shared_buffers", "1TB", ram)
    assert problem is not None and "1024.00 GiB" in problem and "8.00 GiB (RAM)" in problem
    assert shared_memory_problem("shared_buffers", "2GB", ram) is None
    # 8 kB pages without a unit, as postgresql.conf reads them
    assert shared_memory_problem("shared_buffers", "2097152", ram) is not None  # 16 GiB
    assert shared_memory_problem("min_dynamic_shared_memory", "16384", ram) is not None  # MB
    assert shared_memory_problem("wal_buffers", "-1", ram) is None  # automatic
    assert shared_memory_problem("work_mem", "1TB", ram) is None  # not shared memory


@pytest.mark.parametrize(
    ("text", "line", "key", "first"),
    [
        ('[settings]\nwork_mem = "1MB"\nwork_mem = "2MB"\n', 3, ("settings", "work_mem"), 2),
        ("a.b = 1\nc = 2\na.b = 3\n", 3, ("a", "b"), 1),
        ("a = 1\na.b = 2\n", 2, ("a",), 1),
        ('[[steps]]\nworkload = "fio"\n[[steps]]\nscale = 1\nscale = 2\n', 5,
         ("steps", 1, "scale"), 4),
    ],
)  # fmt: skip
def test_overwritten_key(text: str, line: int, key: tuple[object, ...], first: int) -> None:
    assert overwritten_key(text, line) == (key, first)


def test_a_key_set_twice_is_named_in_the_plan_error() -> None:
    text = '[settings]\nwork_mem = "1MB"\nwork_mem = "2MB"\n[[steps]]\nworkload = "fio"\n'
    with pytest.raises(PlanError, match=r"p.toml:3: invalid TOML: settings.work_mem is set twice"):
        parse_plan(text, source="p.toml")
    with pytest.raises(PlanError, match=r"table \[settings\] is declared twice \(first on line 1"):
        parse_plan("[settings]\n[settings]\n", source="p.toml")


def test_error_summary_keeps_the_cause_not_the_server_log() -> None:
    error = (
        "pgbench exited with status 1:\n"
        "pgbench: error: could not write: No space left on device\n"
        "--- server log (last lines) ---\n"
        "LOG: checkpoint starting"
    )
    assert error_summary(error) == (
        "pgbench exited with status 1:\npgbench: error: could not write: No space left on device"
    )
    assert error_summary(None) == "" and error_summary("one line") == "one line"


def test_howfast_directories_are_known_by_name_and_marker(tmp_path: Path) -> None:
    cluster = tmp_path / "howfast-0123abcd"
    inner = cluster / "data" / "mine"
    inner.mkdir(parents=True)
    assert howfast_directory_around(inner) is None  # no marker beside it: not ours
    (tmp_path / ".howfast-owned").write_text("{}")
    assert howfast_directory_around(inner) == cluster
    assert created_by_howfast(tmp_path / "howfast-vol-0123abcd")
    assert not created_by_howfast(tmp_path / "howfast-notatoken")
    assert created_by_howfast(Path("/dev/shm/howfast-run-0123abcd-x1y2z3"))


def test_plain_number_reads_back_exactly_and_never_in_exponent_form() -> None:
    import math
    import random

    from howfast.units import plain_number

    rng = random.Random(35)  # a fixed seed: the same values every run
    values = [0.0, -0.0, 1e-06, 1234567.0, 1e22, 0.1 + 0.2, 5e-324, 1.7976931348623157e308]
    values += [rng.uniform(0, 1e7) for _ in range(500)] + [
        10 ** rng.uniform(-9, 12) for _ in range(500)
    ]
    for value in values:
        text = plain_number(value)
        assert float(text) == value, (value, text)
        assert "e" not in text.lower() and not text.endswith(".") and text != "-0"
    assert [plain_number(v) for v in (20.0, 0.5, 1234567.0, 1e-06)] == [
        "20",
        "0.5",
        "1234567",
        "0.000001",
    ]
    with pytest.raises(ValueError):
        plain_number(math.nan)


def test_quote_shows_letters_as_typed_and_escapes_what_a_terminal_acts_on() -> None:
    from howfast.units import quote

    assert quote("réstart") == '"réstart"'
    assert quote("a\x1b[2Jb") == '"a\\u001b[2Jb"'
    assert quote("x\u202ey") == '"x\\u202ey"'  # a bidirectional override, shown not obeyed
    assert quote("\x9b") == '"\\x9b"'  # the 8-bit CSI
    assert quote(5) == "5"
