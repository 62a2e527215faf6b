"""The results store on SQLite: round trip, migrations, URL resolution, redaction, concurrency."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from howfast.errors import HowfastError, UsageError
from howfast.model import Sample, StepRecord, TargetRecord
from howfast.redact import redact_dsn, redact_text
from howfast.store import (
    ENV_VAR,
    MIGRATIONS,
    SCHEMA_VERSION,
    SqlStore,
    default_store_location,
    default_store_path,
    open_store,
    parse_store_url,
    resolve_store_location,
)
from howfast.store.migrations import read_version
from howfast.store.schema import metadata

ENVIRONMENT = {
    "hostname": "bench1",
    "kernel": "6.1.0",
    "cpu_model": "Xeon",
    "cpu_count": 2,
    "memory_bytes": 8 << 30,
}


def pgbench_step(target: str = "nvme", clients: int = 4, points: int = 5) -> StepRecord:
    return StepRecord(
        target=target,
        workload="pgbench",
        params={"mode": "select-only", "clients": clients, "jobs": 2, "duration_s": 10},
        status="completed",
        started_at="2024-05-01T10:00:00+00:00",
        finished_at="2024-05-01T10:00:10+00:00",
        metrics={"tps": 1234.5, "latency_avg_ms": 3.2, "latency_p99_ms": 9.1},
        warnings=["dataset fits in cache"],
        # Written out of order: the store returns series ordered by t.
        series={
            "tps": [Sample(t=float(i), value=1000.0 + i) for i in reversed(range(points))],
            "latency_ms": [Sample(t=0.5, value=3.0), Sample(t=1.5, value=3.5)],
        },
        histograms={"latency_us": {900: 10, 100: 2, 5000: 1}},
    )


@pytest.fixture
def store(tmp_path: Path):
    with open_store(str(tmp_path / "results.db")) as s:
        yield s


def new_run(store: SqlStore, started_at: str = "2024-05-01T10:00:00+00:00", **kw) -> int:
    return store.create_run("quick", ENVIRONMENT, started_at, **kw)


# -- round trip ------------------------------------------------------------------------------


def test_round_trip(store: SqlStore) -> None:
    run_id = new_run(store, label="first try")
    store.add_target(run_id, TargetRecord(name="nvme", kind="local", location="/mnt/nvme/pg"))
    store.add_target(run_id, TargetRecord(name="ceph", kind="dsn", pg_version="15.18"))
    first = store.add_step(run_id, pgbench_step("nvme", clients=1))
    second = store.add_step(run_id, pgbench_step("ceph", clients=8))
    store.finish_run(run_id, "completed", "2024-05-01T10:05:00+00:00")

    [summary] = store.list_runs()
    assert summary.id == run_id
    assert summary.status == "completed"
    assert summary.label == "first try"
    assert summary.targets == ("nvme", "ceph")
    assert summary.step_count == 2

    run = store.get_run(run_id, with_series=True)
    assert run is not None
    assert run.environment == ENVIRONMENT
    assert run.finished_at == "2024-05-01T10:05:00+00:00"
    assert [t.name for t in run.targets] == ["nvme", "ceph"]
    assert run.targets[1].pg_version == "15.18"
    assert [s.id for s in run.steps] == [first, second]
    step = run.steps[1]
    expected = pgbench_step("ceph", clients=8)
    assert step.params == expected.params
    assert step.metrics == expected.metrics
    assert step.warnings == expected.warnings
    assert step.series["tps"] == sorted(expected.series["tps"], key=lambda p: p.t)
    assert step.series["latency_ms"] == expected.series["latency_ms"]
    assert step.histograms == {"latency_us": {100: 2, 900: 10, 5000: 1}}

    without = store.get_run(run_id)
    assert without is not None
    assert all(not s.series and not s.histograms for s in without.steps)
    assert without.steps[0].metrics == expected.metrics


def test_document_has_the_design_keys(store: SqlStore) -> None:
    run_id = new_run(store)
    store.add_target(run_id, TargetRecord(name="nvme", kind="local"))
    store.add_step(run_id, pgbench_step())
    store.finish_run(run_id, "completed", "2024-05-01T10:05:00+00:00")
    run = store.get_run(run_id, with_series=True)
    assert run is not None

    doc = json.loads(json.dumps(run.document()))
    assert {
        "id",
        "plan",
        "status",
        "started_at",
        "finished_at",
        "environment",
        "targets",
        "steps",
    } <= doc.keys()
    assert doc["id"] == str(run_id)
    assert {"name", "kind", "pg_version", "settings", "device"} <= doc["targets"][0].keys()
    step_doc = doc["steps"][0]
    assert {
        "id",
        "target",
        "workload",
        "params",
        "status",
        "error",
        "metrics",
        "warnings",
    } <= step_doc.keys()
    assert "series" not in step_doc
    assert step_doc["metrics"]["tps"] == 1234.5

    with_series = json.loads(json.dumps(run.document(with_series=True)))["steps"][0]
    assert with_series["series"]["tps"][0] == [0.0, 1000.0]
    assert with_series["histograms"]["latency_us"] == {"100": 2, "900": 10, "5000": 1}


def test_list_runs_newest_first_with_counts(store: SqlStore) -> None:
    old = new_run(store, "2024-01-01T00:00:00+00:00")
    new = new_run(store, "2024-06-01T00:00:00+00:00")
    imported_late = new_run(store, "2023-01-01T00:00:00+00:00")
    store.add_step(new, pgbench_step())
    store.add_step(new, pgbench_step())
    assert [r.id for r in store.list_runs()] == [new, old, imported_late]
    by_id = {r.id: r for r in store.list_runs()}
    assert by_id[new].step_count == 2
    assert by_id[old].step_count == 0
    assert by_id[old].targets == ()
    assert by_id[old].status == "running"
    assert by_id[old].finished_at is None


def test_delete_removes_everything_of_the_run(store: SqlStore, tmp_path: Path) -> None:
    keep = new_run(store)
    store.add_step(keep, pgbench_step())
    gone = new_run(store)
    store.add_target(gone, TargetRecord(name="nvme", kind="local"))
    store.add_step(gone, pgbench_step())
    assert store.delete_run(gone) is True
    assert store.get_run(gone) is None
    assert store.delete_run(gone) is False

    with sqlite3.connect(tmp_path / "results.db") as raw:
        counts = {
            table: raw.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("runs", "targets", "steps", "samples", "histograms")
        }
    assert counts == {"runs": 1, "targets": 0, "steps": 1, "samples": 7, "histograms": 3}
    kept = store.get_run(keep, with_series=True)
    assert kept is not None
    assert kept.steps[0].series["tps"]


def test_update_target_replaces_in_place_or_adds(store: SqlStore) -> None:
    run_id = new_run(store)
    store.add_target(run_id, TargetRecord(name="a", kind="local"))
    store.add_target(run_id, TargetRecord(name="b", kind="local"))
    store.update_target(
        run_id,
        TargetRecord(
            name="a",
            kind="local",
            pg_version="16.3",
            settings={"shared_buffers": "128MB"},
            device={"data": {"model": "Samsung"}, "wal": {}},
        ),
    )
    store.update_target(run_id, TargetRecord(name="c", kind="dsn"))
    run = store.get_run(run_id)
    assert run is not None
    assert [t.name for t in run.targets] == ["a", "b", "c"]
    assert run.targets[0].pg_version == "16.3"
    assert run.targets[0].settings == {"shared_buffers": "128MB"}
    assert run.targets[0].device == {"data": {"model": "Samsung"}, "wal": {}}


def test_target_location_is_redacted(store: SqlStore, tmp_path: Path) -> None:
    run_id = new_run(store)
    store.add_target(
        run_id,
        TargetRecord(name="db", kind="dsn", location="postgresql://bench:hunter2@db1:5432/app"),
    )
    store.update_target(
        run_id, TargetRecord(name="db2", kind="dsn", location="host=db2 password=hunter2")
    )
    run = store.get_run(run_id)
    assert run is not None
    assert run.targets[0].location == "postgresql://bench:***@db1:5432/app"
    assert run.targets[1].location == "host=db2 password=***"
    assert b"hunter2" not in (tmp_path / "results.db").read_bytes()


def test_errors_for_unknown_runs_and_duplicates(store: SqlStore) -> None:
    assert store.get_run(999) is None
    assert store.delete_run(999) is False
    with pytest.raises(HowfastError, match="no run 999"):
        store.add_step(999, pgbench_step())
    with pytest.raises(HowfastError, match="no run 999"):
        store.add_target(999, TargetRecord(name="x", kind="local"))
    with pytest.raises(HowfastError, match="no run 999"):
        store.finish_run(999, "completed", "now")
    run_id = new_run(store)
    with pytest.raises(ValueError, match="not 'running'"):
        store.finish_run(run_id, "running", "now")
    store.add_target(run_id, TargetRecord(name="x", kind="local"))
    with pytest.raises(HowfastError, match="already has a target named 'x'"):
        store.add_target(run_id, TargetRecord(name="x", kind="dsn"))
    store.add_target(run_id, TargetRecord(name="y", kind="local"))  # the store still works
    run = store.get_run(run_id)
    assert run is not None
    assert [(t.name, t.kind) for t in run.targets] == [("x", "local"), ("y", "local")]


def test_non_finite_numbers(store: SqlStore) -> None:
    run_id = new_run(store)
    step = replace(
        pgbench_step(),
        metrics={"tps": math.nan, "latency_max_ms": math.inf, "nested": [math.nan, 1.0]},
        series={"lag_ms": [Sample(0.0, math.nan), Sample(1.0, math.inf), Sample(2.0, 1.0)]},
    )
    store.add_step(run_id, step)
    run = store.get_run(run_id, with_series=True)
    assert run is not None
    [stored] = run.steps
    # Not JSON: stored as null in JSON columns, kept as NaN/inf in series.
    assert stored.metrics == {"tps": None, "latency_max_ms": None, "nested": [None, 1.0]}
    points = stored.series["lag_ms"]
    assert math.isnan(points[0].value)
    assert points[1].value == math.inf
    assert points[2].value == 1.0


def test_every_write_is_committed_at_once(store: SqlStore, tmp_path: Path) -> None:
    run_id = new_run(store)
    store.add_step(run_id, pgbench_step())
    # Another process (here: another store) sees the step before the run finishes.
    with open_store(str(tmp_path / "results.db")) as other:
        run = other.get_run(run_id, with_series=True)
    assert run is not None
    assert run.status == "running"
    assert len(run.steps) == 1
    assert run.steps[0].series["tps"]


def test_large_series_round_trip(store: SqlStore) -> None:
    run_id = new_run(store)
    step = pgbench_step(points=20_000)
    store.add_step(run_id, step)
    run = store.get_run(run_id, with_series=True)
    assert run is not None
    points = run.steps[0].series["tps"]
    assert len(points) == 20_000
    assert [p.t for p in points] == sorted(p.t for p in points)


# -- migrations ------------------------------------------------------------------------------


def _add_note_column(conn) -> None:
    conn.execute(text("ALTER TABLE runs ADD COLUMN note TEXT"))


def _broken_migration(conn) -> None:
    conn.execute(text("CREATE TABLE half_done (x INTEGER)"))
    conn.execute(text("ALTER TABLE no_such_table ADD COLUMN y TEXT"))


def version_of(path: Path) -> int | None:
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            return read_version(conn)
    finally:
        engine.dispose()


def test_new_store_is_at_the_newest_version(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "r.db")) as s:
        assert s.schema_version == SCHEMA_VERSION == len(MIGRATIONS)
    assert version_of(tmp_path / "r.db") == SCHEMA_VERSION


def test_migrations_produce_the_tables_schema_py_describes(tmp_path: Path) -> None:
    open_store(str(tmp_path / "r.db")).close()
    engine = create_engine(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        insp = inspect(engine)
        assert set(insp.get_table_names()) == set(metadata.tables)
        for table in metadata.sorted_tables:
            assert [c["name"] for c in insp.get_columns(table.name)] == [
                c.name for c in table.columns
            ]
            assert {i["name"] for i in insp.get_indexes(table.name)} == {
                i.name for i in table.indexes
            }
    finally:
        engine.dispose()


def test_a_v1_database_is_migrated_and_keeps_its_data(tmp_path: Path) -> None:
    path = str(tmp_path / "r.db")
    with open_store(path, migrations=MIGRATIONS[:1]) as v1:
        assert v1.schema_version == 1
        run_id = new_run(v1)
        v1.add_step(run_id, pgbench_step())
    newest = len(MIGRATIONS) + 1  # every real migration, then one more for the test
    with open_store(path, migrations=(*MIGRATIONS, _add_note_column)) as later:
        assert later.schema_version == newest
        run = later.get_run(run_id, with_series=True)
        assert run is not None
        assert run.steps[0].series["tps"]
    assert version_of(tmp_path / "r.db") == newest
    with sqlite3.connect(path) as raw:
        columns = [row[1] for row in raw.execute("PRAGMA table_info(runs)")]
    assert "note" in columns


def test_a_failed_migration_changes_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "r.db")
    open_store(path, migrations=MIGRATIONS[:1]).close()
    with pytest.raises(HowfastError, match="no_such_table"):
        open_store(path, migrations=(*MIGRATIONS[:1], _broken_migration))
    assert version_of(tmp_path / "r.db") == 1
    with sqlite3.connect(path) as raw:
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    assert "half_done" not in tables  # the DDL was rolled back too


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "r.db")
    open_store(path, migrations=(*MIGRATIONS, _add_note_column)).close()
    with pytest.raises(HowfastError) as caught:
        open_store(path)
    message = str(caught.value)
    assert f"schema version {SCHEMA_VERSION + 1}" in message
    assert f"understands ({SCHEMA_VERSION})" in message
    assert path in message
    assert "upgrade howfast" in message


def test_tables_howfast_did_not_create_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE runs (whatever TEXT)")
    with pytest.raises(HowfastError, match="did not create: runs"):
        open_store(str(path))


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not SQLite " * 100)
    with pytest.raises(HowfastError, match=r"open the results store .*notes\.txt: file is not"):
        open_store(str(path))


# -- where the store is ----------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv(ENV_VAR, raising=False)
    return home


def test_default_store_is_in_the_user_data_directory(home: Path) -> None:
    expected = home / ".local" / "share" / "howfast" / "howfast.db"
    assert default_store_path() == expected
    assert default_store_location() == str(expected)
    assert not expected.parent.exists()
    with open_store(None) as s:
        assert s.location == str(expected)
    assert expected.is_file()


def test_default_store_follows_xdg_data_home(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_store_path() == tmp_path / "xdg" / "howfast" / "howfast.db"


def test_resolution_order(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "from-env.db"))
    assert resolve_store_location(None).sqlite_path == tmp_path / "from-env.db"
    assert resolve_store_location("").sqlite_path == tmp_path / "from-env.db"
    assert default_store_location() == str(tmp_path / "from-env.db")
    explicit = resolve_store_location(str(tmp_path / "explicit.db"))
    assert explicit.sqlite_path == tmp_path / "explicit.db"
    assert not explicit.is_default
    monkeypatch.setenv(ENV_VAR, "  ")
    assert resolve_store_location(None).is_default
    monkeypatch.setenv(ENV_VAR, "postgresql://u:pw@db/results")
    assert default_store_location() == "postgresql://u:***@db/results"


def test_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert parse_store_url("/tmp/x.db").sqlite_path == Path("/tmp/x.db")
    assert parse_store_url("./r.db").sqlite_path == tmp_path / "r.db"
    assert parse_store_url("r.db").sqlite_path == tmp_path / "r.db"
    assert parse_store_url("~/r.db").sqlite_path == tmp_path / "r.db"
    assert parse_store_url("sqlite:///r.db").sqlite_path == tmp_path / "r.db"
    assert parse_store_url("sqlite:////tmp/x.db").sqlite_path == Path("/tmp/x.db")

    pg = parse_store_url("postgresql://bench:pw@db:5433/results?sslmode=require")
    assert pg.sqlite_path is None
    assert pg.url.drivername == "postgresql+psycopg"
    assert (pg.url.host, pg.url.port, pg.url.database) == ("db", 5433, "results")
    assert pg.url.query == {"sslmode": "require"}
    assert pg.display == "postgresql://bench:***@db:5433/results?sslmode=require"
    assert parse_store_url("postgres://db/r").url.drivername == "postgresql+psycopg"
    assert parse_store_url("postgresql+psycopg://db/r").url.drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u:sekrit@h/db", "unsupported scheme 'mysql'"),
        ("sqlite://", "names no file"),
        ("sqlite:///:memory:", "names no file"),
        ("postgresql://u:sekrit@h:notaport/db", "not a valid URL"),
        ("/no/such/dir/r.db", "does not exist"),
        ("   ", "is empty"),
        ("host=db dbname=results password=sekrit", "key=value connection string"),
    ],
)
def test_unusable_urls(url: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        parse_store_url(url)
    assert "sekrit" not in str(caught.value)
    assert caught.value.__cause__ is None


def test_default_directory_that_cannot_be_made(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / ".local").write_text("a file where a directory should be")
    with pytest.raises(HowfastError, match="cannot create the results directory"):
        open_store(None)


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a directory"):
        open_store(str(tmp_path))


def test_environment_errors_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "ftp://u:sekrit@host/x")
    with pytest.raises(UsageError, match=r"\$HOWFAST_STORE has an unsupported scheme") as caught:
        open_store(None)
    assert "sekrit" not in str(caught.value)


# -- redaction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "redacted"),
    [
        ("postgresql://bench:pw@h:5432/db", "postgresql://bench:***@h:5432/db"),
        ("postgres://bench:pw@h/db", "postgres://bench:***@h/db"),
        ("postgresql+psycopg://u:p%40ss@h/db", "postgresql+psycopg://u:***@h/db"),
        ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
        ("postgresql://:pw@h/db", "postgresql://:***@h/db"),
        ("postgresql://u:pw@h1:5432,h2:5433/db", "postgresql://u:***@h1:5432,h2:5433/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://h:5432/db", "postgresql://h:5432/db"),
        ("postgresql://u:@h/db", "postgresql://u:@h/db"),
        ("postgresql://h/db?user=u&password=pw", "postgresql://h/db?user=u&password=***"),
        (
            "postgresql://h/db?password=pw&sslmode=require",
            "postgresql://h/db?password=***&sslmode=require",
        ),
        ("postgresql:///db?host=/run/pg", "postgresql:///db?host=/run/pg"),
        ("host=h password=pw dbname=db", "host=h password=*** dbname=db"),
        ("password=pw", "password=***"),
        ("host=h password = pw", "host=h password = ***"),
        ("host=h password='p w\\' x' user=u", "host=h password=*** user=u"),
        ("host=h PASSWORD=pw", "host=h PASSWORD=***"),
        ("host=h passfile=/x/.pgpass", "host=h passfile=/x/.pgpass"),
        ("dbname=x passwords=1", "dbname=x passwords=1"),
        ("dsn='password=pw host=h'", "dsn='password=*** host=h'"),
        ("PGPASSWORD=pw psql", "PGPASSWORD=*** psql"),
        ("/var/lib/pg/data", "/var/lib/pg/data"),
        (
            "failed for postgresql://u:pw@h/db: password=pw",
            "failed for postgresql://u:***@h/db: password=***",
        ),
    ],
)
def test_redact_dsn(dsn: str, redacted: str) -> None:
    assert redact_dsn(dsn) == redacted


def test_redact_text_also_hides_the_literal_password() -> None:
    assert redact_text("auth failed (tried 'pw!')", "pw!") == "auth failed (tried '***')"
    assert redact_text("nothing to hide", None) == "nothing to hide"
    assert redact_text("a=1 b=2", "1", "2") == "a=*** b=***"
    assert (
        redact_text('connect to "postgresql://u:pw@h/db" failed: password=pw')
        == 'connect to "postgresql://u:***@h/db" failed: password=***'
    )


# -- concurrency -----------------------------------------------------------------------------


def test_sqlite_store_uses_wal(store: SqlStore, tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "results.db") as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_readers_are_not_blocked_by_an_open_write(store: SqlStore, tmp_path: Path) -> None:
    run_id = new_run(store)
    writer = sqlite3.connect(tmp_path / "results.db", isolation_level=None, timeout=0.1)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute(
            "INSERT INTO runs (plan, status, started_at, environment) "
            "VALUES ('other', 'running', '2030-01-01', '{}')"
        )
        # A second process reading while the write is in flight: sees the committed state.
        with open_store(str(tmp_path / "results.db")) as reader:
            assert [r.id for r in reader.list_runs()] == [run_id]
            assert reader.get_run(run_id) is not None
            writer.execute("COMMIT")
            assert len(reader.list_runs()) == 2
    finally:
        writer.close()


def test_concurrent_writer_and_readers(store: SqlStore, tmp_path: Path) -> None:
    run_id = new_run(store)
    steps = 25
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            for _ in range(steps):
                store.add_step(run_id, pgbench_step(points=500))
            store.finish_run(run_id, "completed", "2024-05-01T11:00:00+00:00")
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def read() -> None:
        try:
            with open_store(str(tmp_path / "results.db")) as reader:
                seen = 0
                while not done.is_set():
                    [summary] = reader.list_runs()
                    assert summary.step_count >= seen  # never goes back
                    seen = summary.step_count
                    run = reader.get_run(run_id, with_series=True)
                    assert run is not None
                    # One snapshot per read: every step it returns is complete.
                    assert all(len(s.series["tps"]) == 500 for s in run.steps)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    [summary] = store.list_runs()
    assert summary.step_count == steps
    assert summary.status == "completed"
