"""A distinct password planted in each path a secret could leak through (issue 35), then
looked for in everything howfast prints, writes and stores:

- the server's password in the dsn target's URI (a role made for this test);
- howfast's own PGPASSWORD, which an exec event's command got with howfast's environment;
- an exec event's output: the server's password, a URI with a password, a keyword string;
- an `--in-cluster` argument (refused under --dry-run: no cluster is reached).

The exec event also leaves a grandchild running (`sleep 38 &`): it must be gone when the
run ends."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PgServer
from tests.integration.conftest import Howfast
from tests.pgprocess import alive

pytestmark = pytest.mark.integration

DSN_PW = "dsnPlanted-4Kq"
ENV_PW = "envPlanted-8Wz"
URI_PW = "uriPlanted-2Jm"
KEYWORD_PW = "kwPlanted-6Rt"
INCLUSTER_PW = "icPlanted-3Vb"
ARGV_PW = "argvPlanted-8Kd"  # in the exec event's own command line, as typed
PLANTED = (DSN_PW, ENV_PW, URI_PW, KEYWORD_PW, INCLUSTER_PW, ARGV_PW)

PLAN = """
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "4s"
rate = 200  # where the secrets go, not throughput: flat out on pg_server (fsync off)
"""


def _exec_facts(document: object) -> list[dict[str, Any]]:
    """Every exec event's facts in a run file, wherever its sections keep them."""
    if isinstance(document, dict):
        if "argv" in document and "stdout" in document:
            return [document]
        return [f for v in document.values() for f in _exec_facts(v)]
    if isinstance(document, list):
        return [f for v in document for f in _exec_facts(v)]
    return []


@pytest.fixture
def planted_role(pg_server: PgServer):
    """A role and a database of its own, with DSN_PW as its password."""
    pg_server.psql("DROP DATABASE IF EXISTS planted")
    pg_server.psql("DROP ROLE IF EXISTS planted")
    pg_server.psql(f"CREATE ROLE planted LOGIN PASSWORD '{DSN_PW}'")
    pg_server.psql("CREATE DATABASE planted OWNER planted")
    try:
        yield f"postgresql://planted:{DSN_PW}@127.0.0.1:{pg_server.port}/planted"
    finally:
        pg_server.psql("DROP DATABASE IF EXISTS planted")
        pg_server.psql("DROP ROLE IF EXISTS planted")


def test_a_password_planted_in_each_path_appears_nowhere(
    howfast: Howfast, planted_role: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PGPASSWORD", ENV_PW)  # howfast's own environment (Howfast.env)
    monkeypatch.delenv("HOWFAST_EXEC_ENV", raising=False)
    pidfile = tmp_path / "grandchild.pid"
    script = tmp_path / "leaky.sh"
    script.write_text(
        "#!/bin/sh\n"
        "env\n"
        f"echo 'the server password is {DSN_PW}'\n"
        f"echo 'postgresql://someone:{URI_PW}@db.example/x'\n"
        f"echo 'host=db.example password={KEYWORD_PW}' >&2\n"
        'echo "PGPASSWORD seen: [$PGPASSWORD]" >&2\n'
        f"sleep 38 & echo $! > {pidfile}\n"
    )
    script.chmod(0o755)
    plan = howfast.plan(PLAN)
    outputs: list[str] = []

    event = f"1s:exec={script} postgresql://argv:{ARGV_PW}@db.example/x"
    run = howfast("run", str(plan), "--target", planted_role, "--event", event)
    outputs += [run.stdout, run.stderr]
    assert run.returncode == 0, run.stderr
    # the grandchild outlived its shell, not the run
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5  # init collects it at its own pace
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)

    listed = howfast("results", "list", "--json")
    run_id = str(json.loads(listed.stdout)[0]["id"])
    shown = howfast("results", "show", run_id)
    as_json = howfast("results", "show", run_id, "--json")
    outputs += [listed.stdout, shown.stdout, shown.stderr, as_json.stdout, as_json.stderr]
    assert shown.returncode == 0 and as_json.returncode == 0, shown.stderr + as_json.stderr

    files: list[Path] = []
    for kind, suffix in (("json", "json"), ("csv", "csv"), ("ndjson", "ndjson")):
        path = tmp_path / f"export.{suffix}"
        out = howfast("export", kind, run_id, "-o", str(path))
        assert out.returncode == 0, out.stderr
        outputs += [out.stdout, out.stderr]
        files.append(path)
    prom = tmp_path / "export.prom"
    out = howfast("export", "prometheus", run_id, "-o", str(prom))
    assert out.returncode == 0, out.stderr
    outputs += [out.stdout, out.stderr]
    report = tmp_path / "report.html"
    out = howfast("report", run_id, "-o", str(report))
    assert out.returncode == 0, out.stderr
    outputs += [out.stdout, out.stderr]
    files += [prom, report]

    # The event ran, with the server's place and without a password or howfast's variables:
    # its facts, as stored (the run file carries the step's raw sections).
    (mark,) = [e for s in json.loads(as_json.stdout)["steps"] for e in s.get("events") or []]
    assert mark["verified"] is True
    (facts,) = _exec_facts(json.loads((tmp_path / "export.json").read_text()))
    assert facts["status"] == 0
    seen = dict(line.split("=", 1) for line in facts["stdout"].splitlines() if "=" in line)
    assert seen["PGUSER"] == "planted" and seen["PGDATABASE"] == "planted"
    assert "PGPASSWORD" not in seen and "HOWFAST_STORE" not in seen
    assert "PGPASSWORD seen: []" in facts["stderr"]
    assert "the server password is ***" in facts["stdout"]
    assert "postgresql://someone:***@db.example/x" in facts["stdout"]
    assert "password=***" in facts["stderr"]

    # --in-cluster: refused before anything is made, the argument shown without it.
    refused = howfast(
        "run", "quick", "--target", "k8s://fast", "--in-cluster", "--dry-run",
        "--howfast-image", "howfast:1",
        "--event", f"5s:exec=curl -u admin:{INCLUSTER_PW} http://127.0.0.1/",
    )  # fmt: skip
    assert refused.returncode == 2 and "carries a credential" in refused.stderr
    outputs += [refused.stdout, refused.stderr]

    store = Path(howfast.store)
    files += [p for p in (store, Path(f"{store}-wal"), Path(f"{store}-journal")) if p.exists()]
    assert files and all(p.stat().st_size > 0 for p in files)
    for secret in PLANTED:
        for i, text in enumerate(outputs):
            assert secret not in text, f"{secret} in output {i}"
        for path in files:
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path.name}"
