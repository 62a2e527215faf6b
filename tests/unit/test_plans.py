"""Plans: built-ins, expansion and overrides, error messages with file/line/key, the key-line
scanner, and the value parsers the CLI uses."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from howfast.errors import PlanError, UsageError
from howfast.model import StepSpec
from howfast.plans import (
    Overrides,
    builtin_plan_names,
    builtin_plan_text,
    effective_settings,
    expand,
    key_lines,
    list_builtin_plans,
    load_plan,
    parse_int_list,
    parse_plan,
    parse_set_option,
)
from howfast.plans.load import format_path, line_of
from howfast.units import parse_duration, parse_size
from howfast.workloads.pgbench.plan import parse_modes

DATA = Path(__file__).parent.parent / "data" / "plans"


def plan_error(name: str) -> list[str]:
    """The lines of the PlanError that loading tests/data/plans/NAME gives."""
    with pytest.raises(PlanError) as caught:
        load_plan(str(DATA / name))
    return str(caught.value).splitlines()


def line_containing(name: str, text: str) -> int:
    """1-based number of the only line of a data file that contains `text`: an independent
    way to know where a key is written."""
    lines = (DATA / name).read_text().splitlines()
    hits = [n for n, line in enumerate(lines, start=1) if text in line]
    assert len(hits) == 1, hits
    return hits[0]


def write_plan(tmp_path: Path, text: str, name: str = "my.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def pgbench(mode: str, clients: int, duration_s: int, scale: int, rep: int = 1) -> StepSpec:
    params = {"mode": mode, "clients": clients, "jobs": None, "duration_s": duration_s}
    return StepSpec("pgbench", {**params, "scale": scale}, repetition=rep)


def init(scale: int) -> StepSpec:
    return StepSpec(
        "pgbench-init", {"scale": scale, "generate": "client", "fillfactor": 100, "partitions": 0}
    )


def fio(profile: str, size_bytes: int, runtime_s: int, rep: int = 1) -> StepSpec:
    params = {"profile": profile, "size_bytes": size_bytes, "runtime_s": runtime_s}
    return StepSpec("fio", params, repetition=rep)


# The short storage probe the quick plan starts with.
QUICK_PROBE = [fio("randrw-4k-qd1", 128 * 1024**2, 5), fio("wal-fsync", 128 * 1024**2, 5)]


# --- built-in plans ------------------------------------------------------------------------


def test_builtin_plans_are_listed_with_descriptions() -> None:
    plans = dict(list_builtin_plans())
    names = ["checkpoints", "failover-trials", "fleet", "latency", "quick", "rate-curve",
             "regimes", "replication", "sweep"]  # fmt: skip
    assert list(plans) == names == builtin_plan_names()
    assert "two minutes" in plans["quick"]
    assert "30 minutes" in plans["sweep"]
    # Every built-in plan has its page.
    docs = Path(__file__).parents[2] / "docs" / "plans"
    assert [name for name in names if not (docs / f"{name}.md").exists()] == []


def test_quick_expands_to_probe_then_init_then_two_modes_at_four_client_counts() -> None:
    plan = load_plan("quick")
    assert plan.name == "quick"
    assert expand(plan) == [
        *QUICK_PROBE,
        init(10),
        *(pgbench("select-only", c, 10, 10) for c in (1, 2, 4, 8)),
        *(pgbench("tpcb-like", c, 10, 10) for c in (1, 2, 4, 8)),
    ]
    assert effective_settings(plan) == {"shared_buffers": "128MB", "max_wal_size": "1GB"}


def test_sweep_expands_to_the_published_client_sweep() -> None:
    plan = load_plan("sweep")
    assert expand(plan) == [
        init(250),
        *(pgbench("tpcb-like", c, 300, 250) for c in (1, 2, 4, 8, 16)),
    ]


@pytest.mark.parametrize("name", ["quick", "sweep"])
def test_builtin_text_is_commented_toml_that_loads_as_a_user_file(
    name: str, tmp_path: Path
) -> None:
    text = builtin_plan_text(name)
    assert text.startswith(f"# {name}: ")
    assert "How long:" in text
    assert tomllib.loads(text)["description"] == load_plan(name).description
    # `howfast plans quick > my.toml` gives a plan named after the file, with the same steps.
    copy = load_plan(str(write_plan(tmp_path, text)))
    assert copy.name == "my"
    assert expand(copy) == expand(load_plan(name))


def test_unknown_plan_name_lists_the_builtins_and_suggests_one() -> None:
    with pytest.raises(PlanError) as caught:
        load_plan("quik")
    message = str(caught.value)
    assert 'unknown plan "quik"' in message
    assert 'did you mean "quick"?' in message
    assert "quick, rate-curve, regimes, replication, sweep" in message
    with pytest.raises(PlanError, match="quick, rate-curve, regimes, replication, sweep"):
        builtin_plan_text("nope")


def test_missing_plan_file_names_it_and_lists_the_builtins(tmp_path: Path) -> None:
    missing = tmp_path / "absent.toml"
    with pytest.raises(PlanError) as caught:
        load_plan(str(missing))
    assert f"no such plan file: {missing}" in str(caught.value)
    builtins = (
        "checkpoints, failover-trials, fleet, latency, quick, rate-curve, regimes, replication, "
        "sweep"
    )
    assert f"built-in plans: {builtins}" in str(caught.value)


def test_a_name_without_suffix_is_a_file_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_plan(tmp_path, builtin_plan_text("quick"), name="mine")
    monkeypatch.chdir(tmp_path)
    assert load_plan("mine").name == "mine"


# --- expansion and overrides ----------------------------------------------------------------


def test_full_plan_expands_every_workload_with_exact_params() -> None:
    plan = load_plan(str(DATA / "full.toml"))
    assert plan.name == "full"
    fio = {"size_bytes": 1024**3, "runtime_s": 60}
    pgbench_params = {
        "mode": "simple-update",
        "clients": 16,
        "jobs": 4,
        "transactions": 1000,
        "scale": 50,
        "rate": 500.0,
        "latency_limit_ms": 5.0,
        "protocol": "prepared",
        "extra_args": ["--progress=1"],
    }
    init_params = {
        "scale": 50,
        "generate": "server",
        "fillfactor": 90,
        "partitions": 4,
        "partition_method": "hash",
        "extra_args": ["--unlogged-tables"],
    }
    # repeat = 2 repeats every measuring step, never pgbench-init.
    assert expand(plan) == [
        StepSpec("pg_test_fsync", {"seconds": 2}, 1),
        StepSpec("pg_test_fsync", {"seconds": 2}, 2),
        StepSpec("fio", {"profile": "randread-8k", **fio}, 1),
        StepSpec("fio", {"profile": "randread-8k", **fio}, 2),
        StepSpec("fio", {"profile": "wal-append", **fio}, 1),
        StepSpec("fio", {"profile": "wal-append", **fio}, 2),
        StepSpec("pgbench-init", init_params, 1),
        StepSpec("pgbench", pgbench_params, 1),
        StepSpec("pgbench", pgbench_params, 2),
    ]


def test_settings_become_postgresql_conf_strings() -> None:
    plan = load_plan(str(DATA / "full.toml"))
    assert plan.settings == {
        "shared_buffers": "1GB",
        "synchronous_commit": "off",
        "checkpoint_completion_target": "0.9",
        "max_connections": "200",
        # a dotted TOML key (a nested table) is an extension's setting name
        "auto_explain.log_min_duration": "1s",
    }


def test_each_expanded_step_owns_its_params() -> None:
    specs = expand(load_plan(str(DATA / "full.toml")))
    specs[-1].params["extra_args"].append("--changed")
    assert specs[-2].params["extra_args"] == ["--progress=1"]


def test_order_is_mode_then_clients_then_repetition() -> None:
    specs = expand(load_plan("quick"), Overrides(clients=[1, 2], repeat=2))

    def what(s: StepSpec) -> object:
        return s.params.get("mode", s.params.get("profile"))

    assert [(s.workload, what(s), s.params.get("clients"), s.repetition) for s in specs] == [
        ("fio", "randrw-4k-qd1", None, 1),
        ("fio", "randrw-4k-qd1", None, 2),
        ("fio", "wal-fsync", None, 1),
        ("fio", "wal-fsync", None, 2),
        ("pgbench-init", None, None, 1),
        ("pgbench", "select-only", 1, 1),
        ("pgbench", "select-only", 1, 2),
        ("pgbench", "select-only", 2, 1),
        ("pgbench", "select-only", 2, 2),
        ("pgbench", "tpcb-like", 1, 1),
        ("pgbench", "tpcb-like", 1, 2),
        ("pgbench", "tpcb-like", 2, 1),
        ("pgbench", "tpcb-like", 2, 2),
    ]


def test_overrides_replace_scale_clients_duration_and_modes() -> None:
    overrides = Overrides(scale=100, clients=[32], duration_s=60.0, modes=["simple-update"])
    # --duration is pgbench's: the probe keeps its own runtime.
    assert expand(load_plan("quick"), overrides) == [
        *QUICK_PROBE,
        init(100),
        pgbench("simple-update", 32, 60, 100),
    ]


def test_duration_override_clears_transactions(tmp_path: Path) -> None:
    path = write_plan(
        tmp_path,
        'steps = [{workload = "pgbench", modes = ["tpcb-like"], clients = [1], transactions = 5}]',
    )
    (before,) = expand(load_plan(str(path)))
    assert before.params == {"mode": "tpcb-like", "clients": 1, "jobs": None, "transactions": 5}
    (after,) = expand(load_plan(str(path)), Overrides(duration_s=30))
    assert after.params == {"mode": "tpcb-like", "clients": 1, "jobs": None, "duration_s": 30}


def test_scale_comes_from_the_latest_init_step_or_the_override(tmp_path: Path) -> None:
    path = write_plan(
        tmp_path,
        """
[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = 5

[[steps]]
workload = "pgbench-init"
scale = 10

[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = 5

[[steps]]
workload = "pgbench-init"
scale = 20

[[steps]]
workload = "pgbench"
modes = ["select-only"]
clients = [1]
duration = 5
""",
    )
    plan = load_plan(str(path))
    # Before any init step the scale is unknown (an existing database): no key at all.
    assert [s.params.get("scale", "absent") for s in expand(plan)] == ["absent", 10, 10, 20, 20]
    assert [s.params["scale"] for s in expand(plan, Overrides(scale=7))] == [7] * 5


def test_jobs_is_capped_by_clients_and_none_when_unset(tmp_path: Path) -> None:
    path = write_plan(
        tmp_path,
        'steps = [{workload = "pgbench", modes = ["tpcb-like"], clients = [1, 8], jobs = 4,'
        ' duration = "1m"}]',
    )
    assert [s.params["jobs"] for s in expand(load_plan(str(path)))] == [1, 4]
    assert [s.params["duration_s"] for s in expand(load_plan(str(path)))] == [60, 60]


def test_settings_override_merges_over_the_plan() -> None:
    overrides = Overrides(settings={"Shared_Buffers": "1GB", "fsync": "off"})
    assert effective_settings(load_plan("quick"), overrides) == {
        "shared_buffers": "1GB",
        "max_wal_size": "1GB",
        "fsync": "off",
    }


def test_custom_scripts_resolve_against_the_plan_file_and_ignore_modes_override(
    tmp_path: Path,
) -> None:
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "read.sql").write_text("SELECT 1;\n")
    (tmp_path / "write.sql").write_text("SELECT 2;\n")
    path = write_plan(
        tmp_path,
        """
[[steps]]
workload = "pgbench"
scripts = ["sql/read.sql@9", "write.sql"]
clients = [2]
duration = "10s"
""",
    )
    expected = {
        "mode": "custom",
        "scripts": [f"{tmp_path / 'sql' / 'read.sql'}@9", str(tmp_path / "write.sql")],
        "clients": 2,
        "jobs": None,
        "duration_s": 10,
    }
    assert [s.params for s in expand(load_plan(str(path)))] == [expected]
    assert [s.params for s in expand(load_plan(str(path)), Overrides(modes=["tpcb-like"]))] == [
        expected
    ]


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("missing.sql", "no such script file"),
        ("x.sql@0", "the weight after @ must be a whole number of at least 1"),
        ("x.sql@heavy", "the weight after @ must be a whole number of at least 1"),
        ("@5", "a script needs a file name"),
    ],
)
def test_bad_scripts(tmp_path: Path, script: str, reason: str) -> None:
    (tmp_path / "x.sql").write_text("SELECT 1;\n")
    text = f'[[steps]]\nworkload = "pgbench"\nscripts = ["{script}"]\nclients = [1]\nduration = 1\n'
    with pytest.raises(PlanError) as caught:
        load_plan(str(write_plan(tmp_path, text)))
    assert str(caught.value).startswith(f"{tmp_path / 'my.toml'}:3: steps[0].scripts[0]: {reason}")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"scale": 0}, "--scale must be 1 or more"),
        ({"repeat": 0}, "--repeat must be 1 or more"),
        ({"clients": []}, "--clients needs at least one value"),
        ({"clients": [4, 0]}, "--clients must be 1 or more, got 0"),
        ({"clients": [2, 2]}, "--clients: listed more than once: 2"),
        ({"duration_s": 0}, "--duration: a duration must be more than zero"),
        ({"duration_s": 1.5}, "--duration: must be whole seconds, got 1.5s"),
        ({"settings": {"bad-name": "1"}}, '--set: "bad-name" is not a PostgreSQL setting name'),
        ({"settings": {"work_mem": "1\nfsync=off"}}, "must not contain newlines"),
    ],
)
def test_bad_overrides_are_usage_errors(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        Overrides(**overrides)  # type: ignore[arg-type]
    assert message in str(caught.value)


PGBENCH_STEP = 'workload = "pgbench"\nmodes = ["tpcb-like"]\nclients = [1]\nduration = 1\n'
FIO_STEP = 'workload = "fio"\nprofiles = ["wal-fsync"]\n'


@pytest.mark.parametrize("steps", [PGBENCH_STEP, FIO_STEP])
def test_an_unknown_mode_is_refused_when_any_plan_is_expanded(steps: str) -> None:
    # pgbench knows its modes (its plugin's check_overrides): refused before anything runs,
    # also for a plan without pgbench steps, as when Overrides checked them itself.
    plan = parse_plan(f"[[steps]]\n{steps}", source="p.toml")
    with pytest.raises(UsageError, match='unknown pgbench mode "select_only"'):
        expand(plan, Overrides(modes=["select_only"]))
    with pytest.raises(UsageError, match="--modes: listed more than once"):
        Overrides(modes=["select-only", "select-only"])


# --- errors: file, line, key, reason ------------------------------------------------------


def test_unknown_key_points_at_its_line_and_suggests_the_right_one() -> None:
    line = line_containing("unknown_key.toml", "clints")
    assert line == 9
    assert plan_error("unknown_key.toml") == [
        f"{DATA / 'unknown_key.toml'}:9: steps[1].clints: unknown key for a pgbench step;"
        " did you mean 'clients'?"
    ]


def test_wrong_types() -> None:
    f = DATA / "wrong_types.toml"
    assert plan_error("wrong_types.toml") == [
        f'{f}:1: repeat: must be a whole number, got "2"',
        f'{f}:5: steps[0].modes: must be a list, in [brackets], got "tpcb-like"',
        f"{f}:6: steps[0].clients[1]: must be a whole number, got 2.5",
        f'{f}:7: steps[0].duration: expected a duration such as "500ms", "10s", "2m", "1h"'
        " or a number of seconds",
    ]


def test_impossible_values_each_on_its_own_line() -> None:
    f = DATA / "impossible_values.toml"
    assert plan_error("impossible_values.toml") == [
        f"{f}:1: repeat: must be 1 or more, got 0",
        f"{f}:5: steps[0].scale: must be 1 or more, got 0",
        f"{f}:6: steps[0].fillfactor: must be 10 or more, got 5",
        f"{f}:10: steps[1].modes: must not be empty",
        f"{f}:11: steps[1].clients[1]: must be 1 or more, got 0",
        f"{f}:11: steps[1].clients[2]: must be 1 or more, got -4",
        f'{f}:12: steps[1].duration: a duration must be more than zero, got "-10s"',
        f"{f}:13: steps[1].jobs: must be 1 or more, got 0",
        f'{f}:18: steps[2].size: a size must be more than zero, got "0MiB"',
        f'{f}:19: steps[2].runtime: a duration must be more than zero, got "0s"',
    ]


def test_duration_and_transactions_together_point_at_transactions() -> None:
    line = line_containing("duration_and_transactions.toml", "transactions")
    assert plan_error("duration_and_transactions.toml") == [
        f"{DATA / 'duration_and_transactions.toml'}:{line}: steps[0].transactions:"
        " give duration or transactions, not both"
    ]


def test_unknown_mode_in_a_multi_line_array_points_at_the_element() -> None:
    line = line_containing("unknown_mode.toml", "tpcb_like")
    assert line == 5
    assert plan_error("unknown_mode.toml") == [
        f'{DATA / "unknown_mode.toml"}:5: steps[0].modes[1]: "tpcb_like" is not one of'
        ' "select-only", "tpcb-like", "simple-update"; did you mean "tpcb-like"?'
    ]


def test_unknown_missing_and_misplaced_workload_keys() -> None:
    f = DATA / "bad_workloads.toml"
    assert plan_error("bad_workloads.toml") == [
        f'{f}:2: steps[0].workload: unknown workload "pgbech"; did you mean "pgbench"?',
        f'{f}:5: steps[1]: missing key workload (one of "pgbench-init", "pgbench", "fio",'
        ' "pg_test_fsync", "seqread")',
        f"{f}:12: steps[2].profiles: unknown key for a pgbench step (profiles belongs to fio"
        " steps)",
    ]


def test_missing_keys_point_at_the_step_header() -> None:
    f = DATA / "missing_keys.toml"
    assert plan_error("missing_keys.toml") == [
        f"{f}:1: steps[0]: missing scale (or dataset): how much data to load",
        f"{f}:4: steps[1]: missing modes (or scripts): which transactions to run;"
        " missing duration (or transactions): how long each run lasts",
    ]


def test_several_errors_are_all_reported_in_file_order() -> None:
    f = DATA / "many_errors.toml"
    assert plan_error("many_errors.toml") == [
        f"{f}:2: descripton: unknown key; did you mean 'description'?",
        f'{f}:5: settings."work mem": "work mem" is not a PostgreSQL setting name'
        " (letters, digits and underscores, with dots for extension settings)",
        f"{f}:10: steps[0].fillfactor: must be 100 or less, got 101",
        f"{f}:15: steps[1].clients: listed more than once: 2",
    ]


def test_errors_in_inline_table_steps_point_at_the_element_line() -> None:
    assert plan_error("inline_steps.toml") == [
        f"{DATA / 'inline_steps.toml'}:4: steps[1].jbos: unknown key for a pgbench step;"
        " did you mean 'jobs'?"
    ]


def test_toml_syntax_error_gives_file_and_line() -> None:
    line = line_containing("syntax_error.toml", "10s")
    (message,) = plan_error("syntax_error.toml")
    assert message.startswith(f"{DATA / 'syntax_error.toml'}:{line}: invalid TOML: ")
    assert "(column 14)" in message


def test_toml_error_at_end_of_document() -> None:
    with pytest.raises(PlanError, match=r"^x\.toml: invalid TOML: .*at the end of the file"):
        parse_plan('description = "never closed', source="x.toml")


@pytest.mark.parametrize(
    ("step", "key", "reason"),
    [
        ("partition_method = 'hash'", "partition_method", "needs partitions of 1 or more"),
        ("partitions = -1", "partitions", "must be 0 or more, got -1"),
        ("generate = 'both'", "generate", '"both" is not one of "client", "server"'),
        ("extra_args = ['--scale=5']", "extra_args[0]", "is set by the plan key scale"),
        ("extra_args = ['']", "extra_args[0]", "an empty argument"),
    ],
)
def test_bad_init_steps(step: str, key: str, reason: str) -> None:
    text = f'[[steps]]\nworkload = "pgbench-init"\nscale = 1\n{step}\n'
    with pytest.raises(PlanError) as caught:
        parse_plan(text, source="p.toml")
    assert str(caught.value).startswith(f"p.toml:4: steps[0].{key}: ")
    assert reason in str(caught.value)


@pytest.mark.parametrize(
    ("step", "key", "reason"),
    [
        ("scripts = ['a.sql']", "scripts", "give modes or scripts, not both"),
        ("rate = 0", "rate", "must be more than 0, got 0"),
        ("latency_limit = 'soon'", "latency_limit", '"soon" is not a duration'),
        ("protocol = 'binary'", "protocol", '"binary" is not one of "simple"'),
        ("clients = [true]", "clients[0]", "must be a whole number, got true"),
        ("extra_args = ['-c8']", "extra_args[0]", '"-c8" is set by the plan key clients'),
        ("extra_args = ['-T', '5']", "extra_args[0]", "is set by the plan key duration"),
        ("extra_args = ['--host=db']", "extra_args[0]", "set by the target (--target)"),
        ("extra_args = ['-Uadmin']", "extra_args[0]", "set by the target (--target)"),
    ],
)
def test_bad_pgbench_steps(step: str, key: str, reason: str) -> None:
    text = (
        '[[steps]]\nworkload = "pgbench"\nmodes = ["tpcb-like"]\nduration = 1\n'
        f"clients = [1]\n{step}\n"
    )
    # A repeated key is a TOML error; replace the default instead of adding a second one.
    name = step.split(" = ")[0]
    if name in ("clients",):
        text = text.replace("clients = [1]\n", "")
    with pytest.raises(PlanError) as caught:
        parse_plan(text, source="p.toml")
    line = text.splitlines().index(step) + 1
    assert str(caught.value).startswith(f"p.toml:{line}: steps[0].{key}: ")
    assert reason in str(caught.value)


@pytest.mark.parametrize(
    ("setting", "reason"),
    [
        ("x = [1]", "a setting's value must be a string, number or boolean"),
        ('work_mem = "1MB\\nfsync = off"', "must not contain newlines"),
        ('Work_Mem = "1MB"\nwork_mem = "2MB"', '"Work_Mem" and "work_mem" are the same setting'),
    ],
)
def test_bad_settings(setting: str, reason: str) -> None:
    text = f'[settings]\n{setting}\n\n[[steps]]\nworkload = "pg_test_fsync"\n'
    with pytest.raises(PlanError) as caught:
        parse_plan(text, source="p.toml")
    assert reason in str(caught.value)
    assert str(caught.value).startswith("p.toml:")


def test_a_plan_needs_steps() -> None:
    with pytest.raises(PlanError, match=r"^p\.toml: steps: missing required key$"):
        parse_plan('description = "nothing"\n', source="p.toml")
    with pytest.raises(PlanError, match=r"^p\.toml:1: steps: must not be empty"):
        parse_plan("steps = []\n", source="p.toml")


def test_fio_step_defaults_and_checks() -> None:
    plan = parse_plan('[[steps]]\nworkload = "fio"\nprofiles = ["randrw"]\n', source="p.toml")
    assert [s.params for s in expand(plan)] == [
        {"profile": "randrw", "size_bytes": 64 * 1024**2, "runtime_s": 10}
    ]
    with pytest.raises(PlanError, match=r"p\.toml:3: steps\[0\]\.profiles\[0\]: \"Rand RW\""):
        parse_plan('[[steps]]\nworkload = "fio"\nprofiles = ["Rand RW"]\n', source="p.toml")
    with pytest.raises(PlanError, match=r"p\.toml:4: steps\[0\]\.runtime: must be whole seconds"):
        parse_plan(
            '[[steps]]\nworkload = "fio"\nprofiles = ["a"]\nruntime = "500ms"\n', source="p.toml"
        )


def test_fio_size_is_whole_8k_blocks() -> None:
    text = '[[steps]]\nworkload = "fio"\nprofiles = ["a"]\nsize = "12KiB"\n'
    with pytest.raises(PlanError) as caught:
        parse_plan(text, source="p.toml")
    assert str(caught.value) == (
        "p.toml:4: steps[0].size: must be a multiple of 8KiB (8192 bytes), got 12288 bytes"
    )


def test_pg_test_fsync_step_default_seconds() -> None:
    plan = parse_plan('[[steps]]\nworkload = "pg_test_fsync"\n', source="p.toml")
    assert expand(plan) == [StepSpec("pg_test_fsync", {"seconds": 5})]


def test_a_single_client_count_may_be_written_without_brackets() -> None:
    plan = parse_plan(
        '[[steps]]\nworkload = "pgbench"\nmodes = ["tpcb-like"]\nclients = 4\nduration = 1\n',
        source="p.toml",
    )
    assert [s.params["clients"] for s in expand(plan)] == [4]


def test_plan_name_key_wins_over_the_file_stem() -> None:
    plan = parse_plan('name = "nvme"\nsteps = [{workload = "pg_test_fsync"}]', source="a.toml")
    assert plan.name == "nvme"


# --- where keys are written ---------------------------------------------------------------

SCANNED = """\
# a comment with = and [brackets]
top = 1
quoted = "not # a comment, not [a.table]"
multi = \"\"\"
[[steps]]
fake = 1
\"\"\"

[settings]
shared_buffers = "1GB"
auto_explain.log_min_duration = "1s"
"pg_stat_statements.max" = 1000

[[steps]]
workload = "pgbench"
clients = [1,
  2,   # two
  4,
]

[steps.options]
depth = 3

[[steps]]
workload = 'fio'
nested = [[1, 2], [3]]
table = { a = 1, b = { c = 2 } }

[[steps.runs]]
n = 1

[[steps.runs]]
n = 2

[[other]]
x = 1
"""


def test_key_lines_on_tables_arrays_of_tables_and_values() -> None:
    lines = key_lines(SCANNED)
    expected = {
        ("top",): 2,
        ("quoted",): 3,
        ("multi",): 4,
        ("settings",): 9,
        ("settings", "shared_buffers"): 10,
        ("settings", "auto_explain"): 11,
        ("settings", "auto_explain", "log_min_duration"): 11,
        ("settings", "pg_stat_statements.max"): 12,
        ("steps",): 14,
        ("steps", 0): 14,
        ("steps", 0, "workload"): 15,
        ("steps", 0, "clients"): 16,
        ("steps", 0, "clients", 0): 16,
        ("steps", 0, "clients", 1): 17,
        ("steps", 0, "clients", 2): 18,
        ("steps", 0, "options"): 21,
        ("steps", 0, "options", "depth"): 22,
        ("steps", 1): 24,
        ("steps", 1, "workload"): 25,
        ("steps", 1, "nested"): 26,
        ("steps", 1, "nested", 0): 26,
        ("steps", 1, "nested", 0, 0): 26,
        ("steps", 1, "nested", 0, 1): 26,
        ("steps", 1, "nested", 1): 26,
        ("steps", 1, "nested", 1, 0): 26,
        ("steps", 1, "table"): 27,
        ("steps", 1, "table", "a"): 27,
        ("steps", 1, "table", "b"): 27,
        ("steps", 1, "table", "b", "c"): 27,
        ("steps", 1, "runs"): 29,
        ("steps", 1, "runs", 0): 29,
        ("steps", 1, "runs", 0, "n"): 30,
        ("steps", 1, "runs", 1): 32,
        ("steps", 1, "runs", 1, "n"): 33,
        ("other",): 35,
        ("other", 0): 35,
        ("other", 0, "x"): 36,
    }
    assert lines == expected
    # The scanner agrees with tomllib on what the keys are.
    assert tomllib.loads(SCANNED)["steps"][1]["runs"][1]["n"] == 2


def leaf_paths(value: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaf_paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaf_paths(v, (*path, i))]
    return [path]


@pytest.mark.parametrize(
    "text",
    [SCANNED, builtin_plan_text("quick"), builtin_plan_text("sweep")]
    + [p.read_text() for p in sorted(DATA.glob("*.toml")) if p.name != "syntax_error.toml"],
)
def test_every_value_tomllib_reads_has_a_line(text: str) -> None:
    lines = key_lines(text)
    for path in leaf_paths(tomllib.loads(text)):
        assert path in lines, path
        # and that line really holds the key's last name (or the element, for arrays)
        last_key = next(part for part in reversed(path) if isinstance(part, str))
        assert last_key.split(".")[-1] in text.splitlines()[lines[path] - 1] or isinstance(
            path[-1], int
        )


def test_line_of_falls_back_to_the_nearest_written_ancestor() -> None:
    lines = key_lines(SCANNED)
    assert line_of(lines, ("steps", 1, "runs", 1, "missing")) == 32
    assert line_of(lines, ("steps", 0, "clients", 9)) == 16
    # A setting name with dots, written as a dotted key or as one quoted key.
    assert line_of(lines, ("settings", "auto_explain.log_min_duration")) == 11
    assert line_of(lines, ("settings", "pg_stat_statements.max")) == 12
    assert line_of(lines, ("nowhere",)) is None


def test_key_lines_on_crlf_and_literal_strings() -> None:
    text = "a = 'C:\\path'\r\n[t]\r\nb = '''x\r\n[y]'''\r\nc = 1\r\n"
    assert key_lines(text) == {("a",): 1, ("t",): 2, ("t", "b"): 3, ("t", "c"): 5}


def test_format_path() -> None:
    assert format_path(("steps", 2, "clients", 0)) == "steps[2].clients[0]"
    assert format_path(("settings", "auto_explain.x")) == 'settings."auto_explain.x"'
    assert format_path(()) == ""


# --- value parsers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("10s", 10.0),
        ("10 s", 10.0),
        ("2m", 120.0),
        ("2min", 120.0),
        ("1h", 3600.0),
        ("1.5h", 5400.0),
        ("30", 30.0),
        ("0.25", 0.25),
        (" 10S ", 10.0),
        ("1ms", 0.001),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("0", "a duration must be more than zero"),
        ("0ms", "a duration must be more than zero"),
        ("-1s", "a duration must be more than zero"),
        ("10x", '"10x" is not a duration'),
        ("", '"" is not a duration'),
        ("s", '"s" is not a duration'),
        ("1m30s", '"1m30s" is not a duration'),
        ("inf", '"inf" is not a duration'),
        ("nan", '"nan" is not a duration'),
        ("1e3s", '"1e3s" is not a duration'),
    ],
)
def test_parse_duration_rejects(text: str, reason: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_duration(text, option="--runtime")
    assert str(caught.value).startswith(f"--runtime: {reason}")


def test_durations_in_plans_take_numbers_but_not_booleans() -> None:
    def duration_of(value: str) -> object:
        plan = parse_plan(
            f'[[steps]]\nworkload = "pgbench"\nmodes = ["tpcb-like"]\nclients = 1\n'
            f"duration = {value}\n",
            source="p.toml",
        )
        return expand(plan)[0].params["duration_s"]

    assert duration_of("10") == 10
    assert duration_of("60.0") == 60
    assert duration_of('"1h"') == 3600
    with pytest.raises(PlanError, match="expected a duration"):
        duration_of("true")
    with pytest.raises(PlanError, match="more than zero"):
        duration_of("-0.0")


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4096", 4096),
        ("4096B", 4096),
        ("64MiB", 64 * 1024**2),
        ("64MB", 64 * 1024**2),
        ("64M", 64 * 1024**2),
        ("512kB", 512 * 1024),
        ("1GiB", 1024**3),
        ("1 gib", 1024**3),
        ("1.5KiB", 1536),
        ("2TiB", 2 * 1024**4),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("0", "a size must be more than zero"),
        ("-1MiB", "a size must be more than zero"),
        ("1.5", '"1.5" is not a whole number of bytes'),
        ("1.1KiB", '"1.1KiB" is not a whole number of bytes'),
        ("10XB", '"10XB" is not a size'),
        ("MiB", '"MiB" is not a size'),
        ("1PiB", '"1PiB" is not a size'),
    ],
)
def test_parse_size_rejects(text: str, reason: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_size(text)
    assert str(caught.value).startswith(f"--size: {reason}")


def test_parse_int_list() -> None:
    assert parse_int_list("1,2,4") == [1, 2, 4]
    assert parse_int_list(" 16 , 32 ") == [16, 32]
    for bad in ("", "1,,2", "0", "-1", "a", "1.5", "1;2", "²"):
        with pytest.raises(UsageError, match="is not a whole number of 1 or more"):
            parse_int_list(bad)


def test_parse_modes() -> None:
    assert parse_modes("select-only, tpcb-like") == ["select-only", "tpcb-like"]
    with pytest.raises(UsageError, match=r'unknown pgbench mode "tpcb" \(did you mean "tpcb-like"'):
        parse_modes("tpcb")
    with pytest.raises(UsageError, match="listed more than once"):
        parse_modes("tpcb-like,tpcb-like")


@pytest.mark.parametrize(
    ("text", "pair"),
    [
        ("shared_buffers=1GB", ("shared_buffers", "1GB")),
        ("Work_Mem=64MB", ("work_mem", "64MB")),
        ("search_path=", ("search_path", "")),
        ("auto_explain.log_min_duration=0", ("auto_explain.log_min_duration", "0")),
        ("options=-c a=b", ("options", "-c a=b")),
        ("application_name=it's; rm -rf /", ("application_name", "it's; rm -rf /")),
    ],
)
def test_parse_set_option(text: str, pair: tuple[str, str]) -> None:
    assert parse_set_option(text) == pair


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("shared_buffers", "expected name=value"),
        ("=1", '"" is not a PostgreSQL setting name'),
        ("bad name=1", '"bad name" is not a PostgreSQL setting name'),
        ("1abc=1", '"1abc" is not a PostgreSQL setting name'),
        ("a..b=1", '"a..b" is not a PostgreSQL setting name'),
        ("work_mem=1\nfsync=off", "must not contain newlines"),
        ("listen_addresses=*", '"listen_addresses" cannot be set: howfast\'s servers listen'),
        ("Unix_Socket_Directories=/tmp", '"Unix_Socket_Directories" cannot be set'),
        ("logging_collector=on", "on the storage under test"),
    ],
)
def test_parse_set_option_rejects(text: str, reason: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_set_option(text)
    assert reason in str(caught.value)


def test_a_reserved_setting_in_a_plan_names_its_line(tmp_path: Path) -> None:
    plan = tmp_path / "open.toml"
    plan.write_text(
        '[settings]\nshared_buffers = "1GB"\nlisten_addresses = "*"\n\n'
        '[[steps]]\nworkload = "pgbench"\nclients = [1]\nsettings = { hba_file = "/etc/x" }\n'
    )
    with pytest.raises(PlanError) as caught:
        load_plan(str(plan))
    lines = str(caught.value).splitlines()
    assert lines[0].startswith(f"{plan}:3: settings.listen_addresses: ")
    assert "cannot be set: howfast's servers listen on a private unix socket" in lines[0]
    assert lines[1].startswith(f"{plan}:8: steps[0].settings.hba_file: ")
    assert len(lines) == 2
