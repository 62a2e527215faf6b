"""What a command imports before it answers: most of howfast's start-up time is importing,
so `--help` and `results list` must not load the heavy libraries other commands use, nor
(for `--help`) the commands themselves. Each command runs in a fresh interpreter, through
howfast's own entry point, which writes the modules it loaded when it exits. The times
themselves are benchmarks/startup's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from howfast.model import StepRecord, TargetRecord
from howfast.store import open_store

# Loaded by the commands that use them only: the Kubernetes target, the analysis (numpy,
# scipy) and the reports' charts.
HEAVY = ("kubernetes", "numpy", "scipy", "plotly", "matplotlib")
# cli, its command table and context, the store's location, errors...: not the commands.
HELP_MAX_OWN_MODULES = 25

# The real entry point (`howfast` is howfast.__main__:run); the modules loaded are written
# at exit, whatever the exit status.
WRAPPER = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from howfast.__main__ import run
run()
"""


def loaded_modules(
    tmp_path: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done, json.loads(out.read_text())


def heavy_in(modules: list[str]) -> list[str]:
    """The heavy libraries loaded (a submodule loads its package first)."""
    return [name for name in HEAVY if name in modules]


def own(modules: list[str]) -> list[str]:
    return [m for m in modules if m == "howfast" or m.startswith("howfast.")]


def test_help_imports_no_command_and_no_heavy_library(tmp_path: Path) -> None:
    done, modules = loaded_modules(tmp_path, "--help")
    assert "results  List, show and delete stored runs." in done.stdout
    assert heavy_in(modules) == [], f"howfast --help imported {heavy_in(modules)}"
    mine = own(modules)
    assert len(mine) <= HELP_MAX_OWN_MODULES, (
        f"howfast --help imported {len(mine)} of howfast's modules "
        f"(at most {HELP_MAX_OWN_MODULES}): {mine}"
    )
    commands = [m for m in mine if m.startswith("howfast.cli.") and m != "howfast.cli.app"]
    assert "howfast.cli.run" not in commands and "howfast.cli.results" not in commands, commands


def test_version_imports_no_heavy_library(tmp_path: Path) -> None:
    done, modules = loaded_modules(tmp_path, "--version")
    assert "howfast, version" in done.stdout
    assert heavy_in(modules) == [], f"howfast --version imported {heavy_in(modules)}"


def test_results_list_imports_no_heavy_library(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    db = open_store(str(store))
    try:
        for label in ("first", "second"):
            run_id = db.create_run("quick", {}, "2026-01-01T00:00:00+00:00", label)
            db.add_target(run_id, TargetRecord("/mnt/a", "local", "16.4", {}, {}, "/mnt/a"))
            db.add_step(
                run_id,
                StepRecord(
                    target="/mnt/a",
                    workload="pgbench",
                    params={"mode": "select-only", "clients": 1},
                    status="completed",
                    started_at="2026-01-01T00:00:00+00:00",
                    finished_at="2026-01-01T00:00:10+00:00",
                    metrics={"tps": 500.0},
                ),
            )
            db.finish_run(run_id, "completed", "2026-01-01T00:00:10+00:00")
    finally:
        db.close()
    done, modules = loaded_modules(tmp_path, "results", "list", "--store", str(store))
    assert "first" in done.stdout and "second" in done.stdout, done.stdout
    assert heavy_in(modules) == [], f"howfast results list imported {heavy_in(modules)}"
    # Nor the plan models, the analysis or the workloads' report parts of `results show`, nor
    # the run service's requests or the failure objectives of `results show --slo`.
    unwanted = [
        m
        for m in own(modules)
        if m.startswith(("howfast.plans", "howfast.analysis", "howfast.workloads"))
        or m
        in (
            "howfast.report.terminal",
            "howfast.plugin.overrides",
            "howfast.service.requests",
            "howfast.slo",
        )
    ]
    assert unwanted == [], f"howfast results list imported {unwanted}"
    # An up-to-date SQLite store with no run marked running is read with sqlite3 alone.
    assert "sqlalchemy" not in modules


def test_a_dry_run_imports_no_heavy_library(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    done, modules = loaded_modules(tmp_path, "run", "quick", "--target", str(target), "--dry-run")
    assert "pgbench" in done.stdout, done.stdout
    assert heavy_in(modules) == [], f"howfast run --dry-run imported {heavy_in(modules)}"
    # Nor the database driver: a dry run connects to nothing.
    assert "psycopg" not in modules
    # Nor the event actions (a run without --event), the CloudNativePG target or the emulated
    # volumes (a plain directory target): `--event`'s help is made only when shown
    # (cli/options.py LazyHelpOption), the trials' and events' refusals look at the actions
    # only for steps that have them, and the directory kind imports EmulatedTarget only for
    # --storage-latency/--storage-iops variants. Nor the finder of what a killed server left
    # (a local server needs it only after a crash or a failover).
    others = [
        m
        for m in own(modules)
        if m.startswith(("howfast.events.", "howfast.targets.cnpg.made"))
        or m
        in (
            "howfast.cli.in_cluster",
            "howfast.targets.emulated.target",
            "howfast.targets.leftovers.find",
        )
    ]
    assert others == [], f"howfast run --dry-run on a directory imported {others}"


# A Cluster asks a closed loopback port for the server's version (it fails: no server), then
# says which of the client library's generated API and model modules it loaded.
CLUSTER_PROBE = """
import json, sys
from howfast.errors import HowfastError
from howfast.targets.k8s.cluster import Cluster
try:
    Cluster().server_version()
except HowfastError as exc:
    said = str(exc)
else:
    said = ""
generated = ("kubernetes.client.api.", "kubernetes.client.models.")
loaded = [m for m in sys.modules if m.startswith(generated)]
print(json.dumps({"said": said, "loaded": sorted(loaded)}))
"""


def test_the_kubernetes_api_is_reached_without_the_clients_generated_classes(
    tmp_path: Path,
) -> None:
    """Importing the client's generated API classes builds hundreds of pydantic models
    (restpaths.py): howfast's Cluster sends JSON to the REST paths without them."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: closed\n"
        "clusters:\n- name: closed\n  cluster:\n    server: http://127.0.0.1:9\n"
        "contexts:\n- name: closed\n  context:\n    cluster: closed\n    user: nobody\n"
        "users:\n- name: nobody\n  user:\n    token: not-a-secret\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", CLUSTER_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert "cannot reach the API server http://127.0.0.1:9" in result["said"]
    assert result["loaded"] == []
