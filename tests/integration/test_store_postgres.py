"""The results store on a real PostgreSQL server: round trip, migrations, redacted errors."""

from __future__ import annotations

import json
import socket
import threading
import traceback
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from howfast.errors import HowfastError
from howfast.model import Sample, StepRecord, TargetRecord
from howfast.store import MIGRATIONS, SCHEMA_VERSION, SqlStore, open_store

pytestmark = pytest.mark.integration

ENVIRONMENT = {"hostname": "bench1", "kernel": "6.1.0", "cpu_count": 2, "memory_bytes": 1 << 33}


def database_url(pg_server, database: str, password: str | None = None) -> str:
    password = pg_server.password if password is None else password
    return f"postgresql://{pg_server.user}:{password}@127.0.0.1:{pg_server.port}/{database}"


def query(url: str, sql: str) -> list[tuple]:
    """Run SQL in the test database behind the store's back (autocommit)."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql))
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        engine.dispose()


@pytest.fixture
def database(pg_server) -> Iterator[str]:
    """A fresh database for one test, dropped afterwards (connections and all)."""
    name = f"howfast_store_{uuid.uuid4().hex[:12]}"
    pg_server.psql(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        pg_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def store_url(pg_server, database: str) -> str:
    return database_url(pg_server, database)


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    with open_store(store_url) as s:
        yield s


def step(target: str, clients: int) -> StepRecord:
    return StepRecord(
        target=target,
        workload="pgbench",
        # Key order is kept: PostgreSQL's json (unlike jsonb) stores the text as given.
        params={"mode": "tpcb-like", "clients": clients, "jobs": 1, "duration_s": 10},
        status="completed",
        started_at="2024-05-01T10:00:00+00:00",
        finished_at="2024-05-01T10:00:10+00:00",
        metrics={"tps": 812.25, "latency_avg_ms": 4.9, "statements": [{"sql": "BEGIN;"}]},
        warnings=[],
        series={"tps": [Sample(float(t), 800.0 + t) for t in reversed(range(300))]},
        histograms={"latency_us": {4000: 7, 2000: 3}},
    )


def test_round_trip(store: SqlStore, pg_server) -> None:
    assert store.schema_version == SCHEMA_VERSION
    run_id = store.create_run("quick", ENVIRONMENT, "2024-05-01T10:00:00+00:00", label="pg")
    store.add_target(
        run_id, TargetRecord(name="primary", kind="dsn", location=pg_server.dsn, pg_version="15")
    )
    store.add_target(run_id, TargetRecord(name="local", kind="local", location="/mnt/x"))
    store.update_target(
        run_id,
        TargetRecord(name="primary", kind="dsn", location=pg_server.dsn, settings={"fsync": "off"}),
    )
    first = store.add_step(run_id, step("primary", 1))
    second = store.add_step(run_id, step("local", 4))
    store.finish_run(run_id, "completed", "2024-05-01T10:05:00+00:00")

    [summary] = store.list_runs()
    assert (summary.id, summary.status, summary.label) == (run_id, "completed", "pg")
    assert summary.targets == ("primary", "local")
    assert summary.step_count == 2

    run = store.get_run(run_id, with_series=True)
    assert run is not None
    assert run.environment == ENVIRONMENT
    assert run.targets[0].settings == {"fsync": "off"}
    assert pg_server.password not in (run.targets[0].location or "")
    assert [s.id for s in run.steps] == [first, second]
    got = run.steps[1]
    assert list(got.params) == ["mode", "clients", "jobs", "duration_s"]
    assert got.params["clients"] == 4
    assert got.metrics == step("local", 4).metrics
    assert [p.t for p in got.series["tps"]] == [float(t) for t in range(300)]
    assert got.histograms == {"latency_us": {2000: 3, 4000: 7}}
    doc = json.loads(json.dumps(run.document(with_series=True)))
    assert doc["steps"][1]["series"]["tps"][0] == [0.0, 800.0]

    without = store.get_run(run_id)
    assert without is not None
    assert not without.steps[0].series

    assert store.delete_run(run_id) is True
    assert store.get_run(run_id) is None
    assert store.list_runs() == []
    assert store.delete_run(run_id) is False


def test_the_password_is_not_stored(store: SqlStore, store_url: str, pg_server) -> None:
    run_id = store.create_run("quick", {}, "2024-05-01T10:00:00+00:00")
    store.add_target(run_id, TargetRecord(name="t", kind="dsn", location=pg_server.dsn))
    rows = query(store_url, "SELECT t::text FROM targets t")
    assert rows
    assert all(pg_server.password not in row for (row,) in rows)


def test_migration_from_v1(store_url: str) -> None:
    def add_note_column(conn) -> None:
        conn.execute(text("ALTER TABLE runs ADD COLUMN note TEXT"))

    with open_store(store_url, migrations=MIGRATIONS[:1]) as v1:
        run_id = v1.create_run("quick", {}, "2024-05-01T10:00:00+00:00")
    with open_store(store_url, migrations=(*MIGRATIONS, add_note_column)) as later:
        assert later.schema_version == len(MIGRATIONS) + 1
        assert later.get_run(run_id) is not None
    assert query(store_url, "SELECT note FROM runs") == [(None,)]
    with pytest.raises(HowfastError, match="newer than this howfast understands"):
        open_store(store_url, migrations=MIGRATIONS[:1])


def test_a_failed_migration_changes_nothing(store_url: str) -> None:
    def broken(conn) -> None:
        conn.execute(text("CREATE TABLE half_done (x integer)"))
        conn.execute(text("ALTER TABLE no_such_table ADD COLUMN y text"))

    with pytest.raises(HowfastError, match="no_such_table"):
        open_store(store_url, migrations=(*MIGRATIONS, broken))
    assert query(store_url, "SELECT to_regclass('half_done')") == [(None,)]
    with open_store(store_url) as s:
        assert s.schema_version == SCHEMA_VERSION


def test_concurrent_first_opens_migrate_once(store_url: str) -> None:
    errors: list[BaseException] = []

    def open_and_close() -> None:
        try:
            open_store(store_url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_and_close) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors


def test_tables_howfast_did_not_create_are_refused(store_url: str) -> None:
    query(store_url, "CREATE TABLE steps (whatever text)")
    with pytest.raises(HowfastError, match="did not create: steps"):
        open_store(store_url)


def assert_secret_free(exc: BaseException, *secrets: str) -> None:
    shown = [str(exc), "".join(traceback.format_exception(exc))]
    for secret in secrets:
        assert all(secret not in text for text in shown), shown


def test_wrong_password_message_is_redacted(pg_server, database: str) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    with pytest.raises(HowfastError) as caught:
        open_store(database_url(pg_server, database, password=wrong))
    message = str(caught.value)
    assert "password authentication failed" in message
    assert f"bench:***@127.0.0.1:{pg_server.port}/{database}" in message
    assert "\n" not in message
    assert_secret_free(caught.value, wrong, pg_server.password)


def test_unreachable_server_message_is_redacted() -> None:
    with socket.socket() as sock:  # a port nobody listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    secret = f"pw-{uuid.uuid4().hex}"
    with pytest.raises(HowfastError) as caught:
        open_store(f"postgresql://bench:{secret}@127.0.0.1:{port}/results")
    message = str(caught.value)
    assert f"postgresql://bench:***@127.0.0.1:{port}/results" in message
    assert "refused" in message.lower()
    assert "\n" not in message
    assert_secret_free(caught.value, secret)


def test_password_in_query_is_redacted_in_errors(pg_server, database: str) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    url = f"postgresql://{pg_server.user}@127.0.0.1:{pg_server.port}/{database}?password={wrong}"
    with pytest.raises(HowfastError) as caught:
        open_store(url)
    assert "password=***" in str(caught.value)
    assert_secret_free(caught.value, wrong)


def test_postgres_scheme_alias(pg_server, database: str) -> None:
    url = database_url(pg_server, database).replace("postgresql://", "postgres://", 1)
    with open_store(url) as s:
        assert s.location.startswith("postgres://bench:***@")
        assert s.list_runs() == []
