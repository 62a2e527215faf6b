"""`howfast run` against an existing server reached by URI: no initdb, no files touched,
existing pgbench tables protected, the password never stored or printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PASSWORD, PgServer
from tests.integration.conftest import TINY_PLAN, Howfast
from tests.integration.test_faults import runs_in_store

pytestmark = pytest.mark.integration

# Every transaction logged (`latency_log = "full"`): these tests are about reaching the server
# and what is stored, not the latency log, and a sampled log needs a calibration run before
# each mode's step (workloads/pgbench/logsampling.py).
PLAN = TINY_PLAN.replace('"tpcb-like", "simple-update"', '"tpcb-like"').replace(
    'duration = "1s"', 'duration = "1s"\nlatency_log = "full"'
)


def test_dsn_target_runs_protects_tables_and_hides_password(howfast: Howfast, pg_server: PgServer):
    pg_server.psql(
        "DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history"
    )
    plan = howfast.plan(PLAN)
    data_files_before = sorted(p.name for p in pg_server.data.iterdir())
    first = howfast("run", str(plan), "--target", pg_server.dsn, "--json")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["status"] == "completed"
    target = doc["targets"][0]
    assert target["kind"] == "dsn"
    assert PASSWORD not in target["location"] and "127.0.0.1" in target["location"]
    assert target["pg_version"].startswith(pg_server.bindir.parent.name)
    assert [s["status"] for s in doc["steps"]] == ["completed"] * 3
    assert sorted(p.name for p in pg_server.data.iterdir()) == data_files_before

    # The tables exist now: a second init must be refused without --yes ...
    second = howfast("run", str(plan), "--target", pg_server.dsn)
    assert second.returncode == 2
    assert "already has pgbench tables" in second.stderr and "--yes" in second.stderr
    # ... and allowed with it.
    third = howfast("run", str(plan), "--target", pg_server.dsn, "--yes", "--json")
    assert third.returncode == 0, third.stderr

    # The password is nowhere: not in output, not in the store file.
    for out in (first, second, third):
        assert PASSWORD not in out.stdout and PASSWORD not in out.stderr
    assert PASSWORD.encode() not in Path(howfast.store).read_bytes()
    for suffix in ("-wal", "-journal"):
        side = Path(str(howfast.store) + suffix)
        if side.exists():
            assert PASSWORD.encode() not in side.read_bytes()


def test_server_that_refuses_connections(howfast: Howfast, pg_server: PgServer):
    wrong = pg_server.dsn.replace(PASSWORD, "wrong-password")
    out = howfast("run", "quick", "--target", wrong)
    assert out.returncode == 1
    assert "cannot connect" in out.stderr
    assert "wrong-password" not in out.stderr
    closed = f"postgresql://bench:{PASSWORD}@127.0.0.1:1/postgres"
    out = howfast("run", "quick", "--target", closed)
    assert out.returncode == 1 and "cannot connect" in out.stderr
    assert PASSWORD not in out.stderr


def test_store_in_postgresql(howfast: Howfast, pg_server: PgServer, target_dir: Path):
    pg_server.psql("DROP DATABASE IF EXISTS howfast_results")
    pg_server.psql("CREATE DATABASE howfast_results")
    url = pg_server.dsn.rsplit("/", 1)[0] + "/howfast_results"
    plan = howfast.plan(PLAN.replace('"select-only", "tpcb-like"', '"select-only"'))
    out = howfast("run", str(plan), "--target", str(target_dir), "--store", url, "--json")
    assert out.returncode == 0, out.stderr
    run_id = json.loads(out.stdout)["id"]
    shown = howfast("results", "show", run_id, "--store", url, "--json")
    assert json.loads(shown.stdout)["steps"][1]["metrics"]["tps"] > 0
    assert PASSWORD not in out.stderr + shown.stderr
    pg_server.psql("DROP DATABASE howfast_results")


MALFORMED = [
    # an unclosed IPv6 bracket: libpq's message quotes the whole URI
    "postgresql://bench:{pw}@[::1/postgres",
    # a bad percent escape in the password: libpq quotes the token, the password itself
    "postgresql://bench:{pw}%zz@127.0.0.1/postgres",
    # a bad percent escape elsewhere
    "postgresql://bench:{pw}@127.0.0.1/postgres?application_name=%zz",
    # a port that is not a number, and several servers (valid libpq, refused with the reason)
    "postgresql://bench:{pw}@127.0.0.1:abc/postgres",
    "postgresql://bench:{pw}@127.0.0.1:5432,127.0.0.2:5433/postgres",
    "host=127.0.0.1 port=bad password={pw} dbname=postgres",
    "host=127.0.0.1,127.0.0.2 password='{pw}' dbname=postgres",
]


@pytest.mark.parametrize("template", MALFORMED)
def test_malformed_server_text_is_refused_without_its_password(howfast: Howfast, template: str):
    out = howfast("run", "quick", "--target", template.format(pw=PASSWORD))
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert PASSWORD not in out.stderr + out.stdout
    assert "howfast: error:" in out.stderr
    assert "directory" not in out.stderr  # a server text is never taken for a directory
    assert runs_in_store(howfast) == []


def test_multi_host_uri_says_why(howfast: Howfast):
    out = howfast("run", "quick", "--target", "postgresql://b@h1:5432,h2:5433/db")
    assert out.returncode == 2
    assert "several servers" in out.stderr and "one host" in out.stderr


def test_key_value_connection_string_is_a_server_target(howfast: Howfast, pg_server: PgServer):
    conninfo = (
        f"host=127.0.0.1 port={pg_server.port} user={pg_server.user} "
        f"password={PASSWORD} dbname=postgres"
    )
    plan = howfast.plan(PLAN.replace('"select-only", "tpcb-like"', '"select-only"'))
    out = howfast("run", str(plan), "--target", conninfo, "--yes", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["targets"][0]["kind"] == "dsn"
    assert "password=***" in doc["targets"][0]["location"]
    assert [s["status"] for s in doc["steps"]] == ["completed"] * 2
    assert PASSWORD not in out.stdout + out.stderr
    assert PASSWORD.encode() not in Path(howfast.store).read_bytes()
