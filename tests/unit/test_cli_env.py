"""Commands run in-process with an environment of the test's own (cli/context.py CliEnv):
its streams, its process environment, its store and its clock, and nothing of this
process's. Runs stored with the Store API (tests/unit/stored_runs.py); the commands that
measure are in tests/integration/test_in_process.py."""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pytest

from howfast.cli import main
from howfast.cli.context import CliEnv
from howfast.store import open_store
from tests.unit.stored_runs import init, pgbench, store_run

FIXED = "2030-01-02T03:04:05.000+00:00"


class FixedClock:
    def now(self) -> str:
        return FIXED


def environment(
    store: Path | None, environ: dict[str, str] | None = None, **more: object
) -> CliEnv:
    return CliEnv(
        stdout=io.StringIO(),
        stderr=io.StringIO(),
        environ=environ or {},
        store_url=str(store) if store else None,
        terminal=False,
        **more,  # type: ignore[arg-type]
    )


def out(env: CliEnv) -> str:
    assert isinstance(env.stdout, io.StringIO)
    return env.stdout.getvalue()


def err(env: CliEnv) -> str:
    assert isinstance(env.stderr, io.StringIO)
    return env.stderr.getvalue()


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    """A store with two runs of the same tests: /mnt/b three times faster than /mnt/a."""
    path = tmp_path / "results.db"
    with open_store(str(path)) as db:
        for target, tps in (("/mnt/a", 100.0), ("/mnt/b", 300.0)):
            steps = [init(target, 10.0)]
            steps += [pgbench(target, tps + i, repetition=i + 1) for i in range(3)]
            store_run(db, steps, targets=[target], label=f"on {target}")
    return path


def test_everything_a_command_prints_goes_to_the_environment_streams(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = environment(tmp_path / "r.db")
    assert main(["plans"], env) == 0
    assert "quick" in out(env) and "sweep" in out(env)
    assert "print one with `howfast plans NAME`" in err(env)
    printed = environment(tmp_path / "r.db")
    assert main(["plans", "quick"], printed) == 0
    tomllib.loads(out(printed))
    helped = environment(tmp_path / "r.db")
    assert main(["run", "--help"], helped) == 0  # what click prints itself, too
    assert "--target" in out(helped)
    assert capsys.readouterr() == ("", "")  # nothing on this process's own streams


def test_results_and_compare_read_the_environment_store(
    two_runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = environment(two_runs)
    assert main(["results", "list", "--json"], env) == 0
    assert [r["label"] for r in json.loads(out(env))] == ["on /mnt/b", "on /mnt/a"]
    shown = environment(two_runs)
    assert main(["results", "show", "1", "--json"], shown) == 0
    document = json.loads(out(shown))
    assert document["label"] == "on /mnt/a" and len(document["steps"]) == 4
    table = environment(two_runs)
    assert main(["results", "show", "2"], table) == 0
    assert "/mnt/b" in out(table)
    compared = environment(two_runs)
    assert main(["compare", "1", "2", "--json"], compared) == 0
    tps = next(m for m in json.loads(out(compared))["tests"][1]["metrics"] if m["metric"] == "tps")
    assert tps["differences"][1]["ratio"] == pytest.approx(301 / 101)
    gate = environment(two_runs)
    assert main(["compare", "2", "1", "--fail-if", "tps<-5%"], gate) == 1  # slower: the gate
    assert "tps" in out(gate)
    # --store still wins over the environment's store; an empty store lists nothing.
    other = environment(two_runs)
    assert main(["results", "list", "--json", "--store", str(tmp_path / "o.db")], other) == 0
    assert json.loads(out(other)) == []
    assert capsys.readouterr() == ("", "")


def test_the_store_comes_from_the_environment_given_not_this_process(
    two_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOWFAST_STORE", str(tmp_path / "not-this.db"))
    env = environment(None, {"HOWFAST_STORE": str(two_runs)})
    assert main(["results", "list", "--json"], env) == 0
    assert len(json.loads(out(env))) == 2
    assert not (tmp_path / "not-this.db").exists()


def test_error_exit_statuses_and_messages_go_to_the_environment(
    two_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = environment(two_runs)
    assert main(["results", "show", "42"], missing) == 2
    assert "howfast: error: no run 42 in the store" in err(missing) and out(missing) == ""
    no_target = environment(two_runs)
    assert main(["run", "quick"], no_target) == 2
    assert "give at least one --target" in err(no_target)
    unknown = environment(two_runs)
    assert main(["nope"], unknown) == 2
    assert "No such command 'nope'" in err(unknown)
    bad_option = environment(two_runs)
    assert main(["run", "quick", "--target", "/tmp", "--clients", "two"], bad_option) == 2
    assert "--clients" in err(bad_option)
    assert capsys.readouterr() == ("", "")


def test_a_password_in_the_environment_store_is_never_printed(tmp_path: Path) -> None:
    secret = "pw-in-environ-42"
    # Nothing listens on port 1: opening the store fails, and its message names the store.
    env = environment(None, {"HOWFAST_STORE": f"postgresql://bench:{secret}@127.0.0.1:1/x"})
    status = main(["results", "list"], env)
    assert status != 0
    assert err(env) and secret not in err(env) and secret not in out(env)


def test_a_label_or_target_is_printed_as_written_never_as_emoji(tmp_path: Path) -> None:
    """rich turns ":name:" into an emoji by default: "nightly :100:" was listed as
    "nightly 💯", and a target /mnt/:fire: as /mnt/🔥."""
    path = tmp_path / "results.db"
    with open_store(str(path)) as db:
        target = "/mnt/:fire:"
        store_run(db, [init(target, 10.0)], targets=[target], label="nightly :100: run")
    listed = environment(path)
    assert main(["results", "list"], listed) == 0
    shown = environment(path)
    assert main(["results", "show", "1"], shown) == 0
    for env in (listed, shown):
        assert "nightly :100: run" in out(env) and "/mnt/:fire:" in out(env), out(env)
        assert "\N{HUNDRED POINTS SYMBOL}" not in out(env) and "\N{FIRE}" not in out(env)


def test_stored_timestamps_come_from_the_environment_clock(two_runs: Path, tmp_path: Path):
    env = environment(two_runs, clock=FixedClock())
    exported = tmp_path / "runs.json"
    assert main(["export", "json", "1", "-o", str(exported)], env) == 0
    assert json.loads(exported.read_text())["exported_at"] == FIXED


def test_import_reads_the_environment_stdin(tmp_path: Path) -> None:
    sample = Path(__file__).parent.parent / "data" / "pgbench" / "run-tpcb-pg15.txt"
    env = environment(tmp_path / "r.db", stdin=io.BytesIO(sample.read_bytes()))
    assert main(["import", "pgbench", "-", "--json"], env) == 0
    steps = json.loads(out(env))["steps"]
    assert steps[-1]["workload"] == "pgbench" and steps[-1]["metrics"]["tps"] > 0


def test_the_target_kinds_declare_their_options_and_the_service_hands_them_over(
    tmp_path: Path,
) -> None:
    """cli/kind_options.py: each kind's options are the command's (the CLI names none of
    them); their values reach the kinds through the run service."""
    helped = environment(tmp_path / "r.db")
    assert main(["run", "--help"], helped) == 0
    assert "--storage-latency" in out(helped) and "--namespace" in out(helped)
    probe_help = environment(tmp_path / "r.db")
    assert main(["probe", "--help"], probe_help) == 0  # the run-only ones are not probe's
    assert "--namespace" in out(probe_help) and "--storage-latency" not in out(probe_help)
    directory = tmp_path / "bench"
    directory.mkdir()
    planned = environment(tmp_path / "r.db")
    argv = ["run", "quick", "--target", str(directory), "--storage-latency", "1ms,2ms"]
    assert main([*argv, "--dry-run", "--json"], planned) == 0
    names = [t["name"] for t in json.loads(out(planned))["targets"]]
    assert names == [f"{directory} +1ms", f"{directory} +2ms"]  # a variant each, planned
    assert list(directory.iterdir()) == []
    elsewhere = environment(tmp_path / "r.db")
    assert main(["run", "quick", "--target", str(directory), "--namespace", "b"], elsewhere) == 2
    assert "--namespace: for k8s:// and cnpg:// targets only" in err(elsewhere)


def test_probe_refuses_a_server_uri_it_used_to_take_for_a_directory(tmp_path: Path) -> None:
    for text in ("postgresql://u:pw-42@127.0.0.1/db", "host=127.0.0.1 password=pw-42"):
        env = environment(tmp_path / "r.db")
        assert main(["probe", text, "--dry-run"], env) == 2
        assert "howfast probe measures storage: it cannot probe a postgresql://" in err(env)
        assert "pw-42" not in err(env) + out(env)


def test_a_report_says_it_was_made_at_the_environment_clock_time(two_runs: Path, tmp_path: Path):
    page, notes = tmp_path / "r.html", tmp_path / "r.md"
    for written in (page, notes):
        env = environment(two_runs, clock=FixedClock())
        assert main(["report", "1", "2", "-o", str(written)], env) == 0
        assert "2030-01-02 03:04 UTC" in written.read_text()
