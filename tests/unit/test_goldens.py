"""What users see of a fixed set of runs is what tests/data/documents/ recorded: the JSON
document of `results show --json`, the text of `results show`, `export prometheus`'s text.
A difference fails; if it is meant, regenerate them (tests/unit/goldens.py says how) and
commit them with the change."""

from __future__ import annotations

import pytest

from tests.unit.goldens import CASES, GOLDEN_DIR, SUFFIXES, golden, outputs

REGENERATE = "if this change is meant, run `.venv/bin/python -m tests.unit.goldens write`"


@pytest.mark.parametrize("name", sorted(CASES))
def test_what_users_see_of_a_run_is_unchanged(name: str) -> None:
    now, recorded = outputs(name), golden(name)
    assert now.document == recorded.document, f"{name}.json differs; {REGENERATE}"
    assert now.show == recorded.show, f"{name}.txt differs; {REGENERATE}"
    assert now.prometheus == recorded.prometheus, f"{name}.prom differs; {REGENERATE}"


def test_every_golden_file_belongs_to_a_case() -> None:
    names = {f"{case}{suffix}" for case in CASES for suffix in SUFFIXES}
    found = {p.name for p in GOLDEN_DIR.iterdir() if p.suffix in SUFFIXES}
    assert found == names
