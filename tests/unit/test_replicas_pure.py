"""The pure half of issue 28's standbys: the design words, the replica spec, the builders of
the base backup and the standby's settings, pg_stat_replication's rows parsed."""

from __future__ import annotations

import json
from pathlib import Path, PurePath

import pytest

from howfast.design import DesignOptions, merge_design, split_design_query
from howfast.errors import PlanError, UsageError
from howfast.machine.pgbin import PgInstall
from howfast.plans import load_plan
from howfast.targets import registry
from howfast.targets.base import Connection
from howfast.targets.kind import TargetOptions
from howfast.targets.local import LocalTarget
from howfast.targets.replicas.builders import (
    MAX_SLOT_KEEP_BYTES,
    basebackup_argv,
    make_synchronous_sql,
    primary_conninfo,
    primary_replication_settings,
    slot_keep_bytes,
    standby_conf,
)
from howfast.targets.replicas.spec import ReplicaSpec
from howfast.targets.replicas.state import caught_up, describe_state, parse_state

DATA = Path(__file__).parent.parent / "data" / "replication"
DIRECTORY_KEYS = frozenset({"replicas", "sync", "standby_dir", "standby_latency"})
PRIMARY = Connection(host="/dev/shm/howfast-run-x", port=5433, user="howfast", dbname="postgres")


# -- design.py -------------------------------------------------------------------------------


def test_a_query_after_a_directory_is_split_off() -> None:
    text, design = split_design_query(
        "/data/a?replicas=2&sync=remote_write&standby_latency=2ms", DIRECTORY_KEYS
    )
    assert text == "/data/a"
    assert design == DesignOptions(replicas=2, sync="remote_write", standby_latency_ms=2.0)


def test_standby_dir_repeats_in_a_query() -> None:
    _, design = split_design_query("/a?standby_dir=/b&standby_dir=/c", DIRECTORY_KEYS)
    assert design.standby_dirs == (Path("/b"), Path("/c"))


def test_a_question_mark_without_pairs_is_part_of_the_path() -> None:
    assert split_design_query("/data/what?", DIRECTORY_KEYS) == ("/data/what?", DesignOptions())
    assert split_design_query("/data/a?b", DIRECTORY_KEYS) == ("/data/a?b", DesignOptions())
    assert split_design_query("/data/a", DIRECTORY_KEYS) == ("/data/a", DesignOptions())


def test_an_unknown_key_names_the_known_ones() -> None:
    with pytest.raises(UsageError) as caught:
        split_design_query("/data/a?replica=1", DIRECTORY_KEYS)
    assert str(caught.value) == (
        "/data/a?replica=1: unknown option replica (did you mean replicas?); the options: "
        "replicas, sync, standby_dir, standby_latency"
    )


@pytest.mark.parametrize("query", ["REPLICAS=1", "Replicas=1", "replicas=1&SYNC=on"])
def test_a_key_in_another_case_is_refused_by_name_not_taken_for_a_directory(query: str) -> None:
    """Keys are lower-case, matched exactly like every option; before, `?REPLICAS=1` was
    read as part of the directory's name ("directory .../a?REPLICAS=1 does not exist")."""
    with pytest.raises(UsageError) as caught:
        split_design_query(f"/data/a?{query}", DIRECTORY_KEYS)
    said = str(caught.value)
    assert "keys are lower-case: did you mean" in said
    assert said.startswith(f"/data/a?{query}: unknown option ")


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("replicas=9", "not in the range 0<=x<=8"),
        ("replicas=-1", "not in the range"),
        ("replicas=x", "not a number of standbys"),
        ("sync=yes", "'yes' is not one of off, local, remote_write, on, remote_apply"),
        ("sync=on&sync=off", "sync is given twice"),
        ("standby_latency=fast", "standby_latency="),
    ],
)
def test_bad_values_are_usage_errors(query: str, said: str) -> None:
    with pytest.raises(UsageError, match=None) as caught:
        split_design_query(f"/a?{query}", DIRECTORY_KEYS)
    assert said in str(caught.value)


def test_the_first_layer_that_says_a_key_wins() -> None:
    target = DesignOptions(sync="remote_apply")
    cli = DesignOptions(replicas=1, sync="on")
    plan = DesignOptions(replicas=3, standby_latency_ms=1.0)
    assert merge_design(target, cli, plan) == DesignOptions(
        replicas=1, sync="remote_apply", standby_latency_ms=1.0
    )
    assert DesignOptions(replicas=1, standby_dirs=(Path("/b"),)).given() == [
        "replicas",
        "standby_dir",
    ]


# -- spec.py ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sync", "names", "commit", "state"),
    [
        ("off", "", "on", "async"),
        ("local", "FIRST 2 (standby_1, standby_2)", "local", "sync"),
        ("remote_write", "FIRST 2 (standby_1, standby_2)", "remote_write", "sync"),
        ("on", "FIRST 2 (standby_1, standby_2)", "on", "sync"),
        ("remote_apply", "FIRST 2 (standby_1, standby_2)", "remote_apply", "sync"),
    ],
)
def test_each_level_sets_the_primary(sync: str, names: str, commit: str, state: str) -> None:
    spec = ReplicaSpec(2, sync)  # type: ignore[arg-type]
    assert spec.names == ("standby_1", "standby_2")
    assert spec.synchronous_standby_names == names
    assert spec.synchronous_commit == commit  # off: async standbys, never commit=off
    assert spec.expected_sync_state == state


def test_a_spec_has_a_standby() -> None:
    with pytest.raises(ValueError):
        ReplicaSpec(0, "on")
    assert ReplicaSpec(1, "on").describe() == "1 sync standby (on)"
    assert ReplicaSpec(2, "off").describe() == "2 async standbys"


# -- builders.py -----------------------------------------------------------------------------


def test_the_base_backup_streams_wal_and_creates_the_slot() -> None:
    argv = basebackup_argv("/usr/bin/pg_basebackup", PRIMARY, PurePath("/d/s1/data"), "standby_1")
    assert argv == [
        "/usr/bin/pg_basebackup",
        "-D", "/d/s1/data",
        "-h", "/dev/shm/howfast-run-x", "-p", "5433", "-U", "howfast",
        "-X", "stream", "-c", "fast", "-C", "-S", "standby_1", "--no-password", "--no-sync",
    ]  # fmt: skip
    assert "-R" not in argv  # howfast writes its own primary_conninfo


def test_a_standby_syncs_its_copy_once_at_start_with_syncfs_when_it_can() -> None:
    # the copy is not synced by pg_basebackup (--no-sync): the standby's first start syncs
    # its data directory, as one syncfs() from PostgreSQL 14 on (an fsync per file before)
    assert standby_conf("s", 1, "/r", PRIMARY, syncfs=True)["recovery_init_sync_method"] == (
        "syncfs"
    )
    assert "recovery_init_sync_method" not in standby_conf("s", 1, "/r", PRIMARY)


def test_a_standby_conf_holds_no_password_and_no_sync_names() -> None:
    with_password = Connection("127.0.0.1", 5433, "howfast", "postgres", password="s3cret")
    conf = standby_conf("standby_1", 6000, "/run/x", with_password, passfile="/run/x/pgpass")
    assert "s3cret" not in json.dumps(conf)
    assert conf["primary_conninfo"] == (
        "host=127.0.0.1 port=5433 user=howfast application_name=standby_1 passfile=/run/x/pgpass"
    )
    assert conf["synchronous_standby_names"] == ""  # promoted, it would wait for itself
    assert conf["primary_slot_name"] == "standby_1"
    assert conf["listen_addresses"] == "" and conf["hot_standby"] == "on"
    assert conf["port"] == "6000" and conf["unix_socket_directories"] == "/run/x"


def test_conninfo_values_with_spaces_are_quoted() -> None:
    odd = Connection("/tmp/a b", 1, "it's", "postgres")
    assert primary_conninfo("standby_1", odd) == (
        "host='/tmp/a b' port=1 user='it\\'s' application_name=standby_1"
    )


def test_the_primary_keeps_bounded_wal_for_its_slots() -> None:
    settings = primary_replication_settings(ReplicaSpec(9, "on"), slot_keep_bytes(10 * 1024**3))
    assert settings["max_wal_senders"] == "11" and settings["max_replication_slots"] == "11"
    assert settings["max_slot_wal_keep_size"] == "2560MB"  # a quarter of the free space
    assert slot_keep_bytes(10**15) == MAX_SLOT_KEEP_BYTES
    assert slot_keep_bytes(None) == MAX_SLOT_KEEP_BYTES
    assert primary_replication_settings(ReplicaSpec(1, "on"), 10**9)["max_wal_senders"] == "10"


def test_make_synchronous_quotes_the_names() -> None:
    assert make_synchronous_sql(ReplicaSpec(1, "remote_apply"))[:2] == [
        "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby_1)'",
        "ALTER SYSTEM SET synchronous_commit = 'remote_apply'",
    ]


# -- state.py --------------------------------------------------------------------------------


def test_recorded_rows_under_load_parse() -> None:
    """tests/data/replication/busy.json: two sync standbys (FIRST 2) under pgbench, recorded
    by record.py beside it on PostgreSQL 15."""
    states = parse_state(json.loads((DATA / "busy.json").read_text()))
    assert list(states) == ["standby_1", "standby_2"]
    s1 = states["standby_1"]
    assert (s1.state, s1.sync_state, s1.sync_priority) == ("streaming", "sync", 1)
    assert s1.write_lag_ms == pytest.approx(0.335)
    assert s1.flush_lag_ms == pytest.approx(1.056)
    assert s1.replay_lag_ms == pytest.approx(1.982)
    assert s1.current_lsn - (s1.replay_lsn or 0) == 544
    assert not caught_up(s1, s1.current_lsn) and caught_up(s1, s1.replay_lsn or 0)
    assert describe_state("standby_1", states) == "streaming (sync), replay 544 bytes behind"
    assert describe_state("standby_3", states) == "not connected"


def test_null_lags_stay_none() -> None:
    """A walsender that has not measured a lag yet gives NULL (made from a recorded row with
    the lag columns emptied: PostgreSQL does so when idle): no measurement, never 0."""
    row = json.loads((DATA / "idle.json").read_text())[0]
    row[8:11] = [None, None, None]
    row[1] = "catchup"
    (state,) = parse_state([row]).values()
    assert state.write_lag_ms is None and state.flush_lag_ms is None
    assert not caught_up(state, 0)


def test_a_row_of_another_shape_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_state([["standby_1", "streaming"]])


# -- the kinds and the design options --------------------------------------------------------

INSTALL = PgInstall(Path("/usr/lib/postgresql/15/bin"), "15.18", "test")


@pytest.mark.parametrize(
    ("text", "design", "said"),
    [
        # k8s takes --replicas and --sync (E2); not a standby directory
        ("k8s://fast", DesignOptions(standby_dirs=(Path("/x"),)),
         "--standby-dir: not for k8s://fast (a k8s://"),
        ("postgresql://u:pw@db/app", DesignOptions(replicas=1),
         "postgresql://u:***@db/app: howfast does not add standbys to a server it did not create"),
        ("postgresql://db/app", DesignOptions(sync="on"), "--sync: not for postgresql://db/app"),
    ],
)  # fmt: skip
def test_kinds_refuse_the_design_options_they_cannot_build(
    text: str, design: DesignOptions, said: str
) -> None:
    with pytest.raises(UsageError) as caught:
        registry.make_targets([text], TargetOptions(INSTALL, design=design))
    assert said in str(caught.value)
    assert ":pw@" not in str(caught.value)


def test_a_directory_takes_the_run_options_and_its_own_query_first() -> None:
    options = TargetOptions(INSTALL, design=DesignOptions(replicas=2, sync="remote_write"))
    (plain,) = registry.make_targets(["/mnt/a"], options)
    (own,) = registry.make_targets(["/mnt/a?sync=off"], options)
    assert isinstance(plain, LocalTarget) and isinstance(own, LocalTarget)
    assert plain.replicas == ReplicaSpec(2, "remote_write") and own.replicas == ReplicaSpec(
        2, "off"
    )
    assert plain.name == "/mnt/a with 2 sync standbys (remote_write)"
    assert own.directory == Path("/mnt/a") and own.name == "/mnt/a with 2 async standbys"
    (none,) = registry.make_targets(["/mnt/a"], TargetOptions(INSTALL))
    assert isinstance(none, LocalTarget) and none.replicas is None and none.name == "/mnt/a"


# -- a plan's [design] ---------------------------------------------------------------------


def _plan(tmp_path: Path, design: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        f'{design}\n[[steps]]\nworkload = "pgbench"\nmodes = ["tpcb-like"]\n'
        'clients = [1]\nduration = "1s"\n'
    )
    return path


def test_a_plans_design_section(tmp_path: Path) -> None:
    plan = load_plan(str(_plan(tmp_path, '[design]\nreplicas = 2\nsync = "remote_apply"\n'
                                          'standby_latency = "1ms"')))  # fmt: skip
    assert plan.design is not None
    assert plan.design.options() == DesignOptions(
        replicas=2, sync="remote_apply", standby_latency_ms=1.0
    )
    assert load_plan(str(_plan(tmp_path, ""))).design is None


@pytest.mark.parametrize(
    ("section", "said"),
    [
        ("replicas = 9", "replicas"),
        ('sync = "maybe"', "sync"),
        ("replica = 1", "replica"),
        ('standby_latency = "1s"', "standby_latency"),
    ],
)
def test_a_bad_design_section_is_refused(tmp_path: Path, section: str, said: str) -> None:
    with pytest.raises(PlanError) as caught:
        load_plan(str(_plan(tmp_path, f"[design]\n{section}")))
    assert said in str(caught.value)
