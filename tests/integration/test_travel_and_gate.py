"""Real runs travel between stores and gate a pipeline.

Three real runs of one tpcb-like client, whose pace is set by each commit's WAL flush: on this
machine's disk with five repetitions, each commit's flush 5 ms later (BASE:
`commit_delay=5000`, `commit_siblings=0`); on the same disk with five repetitions and a change
to 20 ms (NEW: `commit_delay=20000`, as a disk whose flush took 15 ms longer would); on tmpfs
(/dev/shm) with one repetition. `compare --fail-if` must find NEW a significant regression
(exit 1), nothing wrong in a run against itself or in the improvement back (0), and say that
one repetition cannot be judged (3).

Why these delays and five repetitions: beside the delay, each transaction waits for the CPU
(seven statements, each a wake-up of the client and the server). On a quiet machine that is
about 0.5 ms; in a CI run with the other test sessions and busy loops beside it, NEW (10 ms
then) was only 2.4x BASE (2 ms then), so the wait averaged ~3.6 ms and moved between
repetitions, and with three repetitions (Welch's test: ~2 degrees of freedom, the difference
must exceed 4.3 standard errors) the 2.4x fall was not significant. Longer delays make that
wait a smaller share of BASE's time (a ±2 ms wander is ~23% of 8.6 ms, not ~35% of 5.6 ms),
and five repetitions halve the critical value (~2.8 at 4 degrees of freedom) and shrink the
standard error: the same load then gives t ≈ 6. Tmpfs against the plain disk, the first idea,
cannot work at all: this machine's disk flushes in about 0.15 ms (a hypervisor's write cache)
and tmpfs, bound by the CPU, varies by 30-40% between repetitions on a loaded machine.

`export json` then `import run` into another store must show the same figures and the same
verdicts, and the gate must say the same there; `export csv|ndjson` rows must be the figures
and samples `results show` has."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import shared_tmpdir
from tests.integration.conftest import Howfast, finish

pytestmark = pytest.mark.integration

PLAN = """
description = "one tpcb-like client: its pace is the WAL flush"
[settings]
shared_buffers = "32MB"
[[steps]]
workload = "pgbench-init"
scale = 1
[[steps]]
workload = "pgbench"
modes = ["tpcb-like"]
clients = [1]
duration = "2s"
latency_log = "full"
"""
# Every transaction logged: a few hundred a second at one paced client, which a sampled log
# would keep whole too, without the 1 s calibration run before each run's first step
# (workloads/pgbench/logsampling.py).
# BASE waits 5 ms before each commit's flush, NEW 20 ms (commit_siblings=0: even with one
# client). A BASE bound by the CPU varied too much on a loaded machine for any fall to be
# significant (a plain BASE 10x faster than NEW was not: its TPS followed the other tests'
# load); one paced by a sleep varies far less, the more so the longer the sleep (docstring).
BASE_COMMITS = ["--set", "commit_delay=5000", "--set", "commit_siblings=0"]
SLOWER_COMMITS = ["--set", "commit_delay=20000", "--set", "commit_siblings=0"]
GATE = ["--fail-if", "tps<-5%", "--fail-if", "latency_avg_ms>+10%"]


@dataclass
class Runs:
    howfast: Howfast
    disk: str  # BASE: five repetitions on this machine's disk
    slower: str  # NEW: five repetitions, 15 ms more per commit
    once: str  # one repetition on tmpfs


def _empty_dir(target: Path) -> Path:
    """An empty directory the unprivileged PostgreSQL user can reach."""
    target.mkdir()
    target.chmod(0o755)
    return target


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm: no tmpfs target")
    work = tmp_path_factory.mktemp("travel")
    howfast = Howfast(store=work / "results.db", workdir=work)
    plan = howfast.plan(PLAN)
    shm = Path(tempfile.mkdtemp(prefix="howfast-gate-", dir="/dev/shm"))
    shm.chmod(0o755)
    disk = shared_tmpdir("howfast-gate-")
    try:
        # The three runs side by side, each on its own directory: BASE and NEW are paced by
        # their commit_delay sleeps and mostly wait, so running together costs each little
        # and the fixture takes the longest run's time, not the sum (the store takes
        # concurrent runs: SQLite in WAL mode). Both disk runs then also share the same load.
        designs = ((disk, "5", BASE_COMMITS), (disk, "5", SLOWER_COMMITS), (shm, "1", []))
        procs = []
        for i, (base, repeat, extra) in enumerate(designs):
            target = _empty_dir(base / f"run-{i}")
            argv = ["run", str(plan), "--target", str(target), "--repeat", repeat, *extra]
            procs.append(howfast.popen(*argv, "--json"))
        ids = []
        for proc in procs:
            out, err = finish(proc, None, 240)
            assert proc.returncode == 0, err
            ids.append(json.loads(out)["id"])
        yield Runs(howfast, *ids)
    finally:
        howfast.stop_all()
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)


def gate_result(out: subprocess.CompletedProcess[str]) -> tuple[int, dict]:
    """`compare --json`'s exit status and document."""
    assert out.returncode in (0, 1, 3), out.stderr
    return out.returncode, json.loads(out.stdout)


def tps_check(document: dict) -> dict:
    return next(c for c in document["gate"]["checks"] if c["threshold"] == "tps<-5%")


# -- the gate -------------------------------------------------------------------------------------


def test_slower_commits_are_a_significant_regression(runs: Runs) -> None:
    out, as_json = runs.howfast.together(
        ["compare", runs.disk, runs.slower, *GATE],
        ["compare", runs.disk, runs.slower, *GATE, "--json"],
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "gate: FAILED" in out.stderr
    assert "FAIL" in out.stdout and "tps<-5%" in out.stdout
    code, document = gate_result(as_json)
    assert code == 1
    assert "commit_delay" in " ".join(document["warnings"])  # compare says what differs
    check = tps_check(document)
    print(f"NEW/BASE TPS {check['ratio']:.2f}, p = {check['p_value']:.2g}")  # shown with -s
    assert check["outcome"] == "fail" and check["significant"] is True
    assert check["ratio"] < 0.95
    # the ratio is the one compare computed from the stored figures
    test = next(t for t in document["tests"] if t["workload"] == "pgbench")
    assert test["repetitions"] == [5, 5]
    tps = next(m for m in test["metrics"] if m["metric"] == "tps")
    means = [v["mean"] for v in tps["values"]]
    assert check["ratio"] == pytest.approx(means[1] / means[0])


def test_a_run_against_itself_and_an_improvement_pass(runs: Runs) -> None:
    itself, back = runs.howfast.together(
        ["compare", runs.disk, runs.disk, *GATE, "--json"],
        ["compare", runs.slower, runs.disk, *GATE, "--json"],
    )
    code, document = gate_result(itself)
    assert code == 0
    assert {c["outcome"] for c in document["gate"]["checks"]} == {"pass"}
    assert tps_check(document)["ratio"] == pytest.approx(1.0)
    code, document = gate_result(back)
    assert code == 0
    assert tps_check(document)["ratio"] > 1.05 and tps_check(document)["significant"] is True


def test_one_repetition_cannot_be_judged(runs: Runs) -> None:
    out = runs.howfast("compare", runs.disk, runs.once, "--fail-if", "tps<-5%")
    assert out.returncode == 3, out.stdout + out.stderr
    assert "CANNOT JUDGE" in out.stdout and "1 repetition" in out.stdout
    assert "gate: cannot judge" in out.stderr


def test_bad_thresholds_exit_2(runs: Runs) -> None:
    out = runs.howfast("compare", runs.disk, runs.slower, "--fail-if", "tsp<-5%")
    assert out.returncode == 2
    assert "unknown metric 'tsp'" in out.stderr and "tps, steady_tps" in out.stderr
    out = runs.howfast("compare", runs.disk, runs.slower, "--fail-if", "tps>5")
    assert out.returncode == 2 and "the change must be a percentage" in out.stderr


# -- runs travel ----------------------------------------------------------------------------------


def show_argv(run_id: str, store: Path | None = None) -> list[str]:
    args = ["--store", str(store)] if store else []
    return ["results", "show", run_id, "--json", "--series", *args]


def shown(howfast: Howfast, run_id: str, store: Path | None = None) -> dict:
    return shown_document(howfast(*show_argv(run_id, store)))


def shown_document(out: subprocess.CompletedProcess[str]) -> dict:
    """`results show --json --series`'s document without what differs between stores."""
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    document.pop("id")
    provenance = document["environment"].pop("provenance", None)
    for step in document["steps"]:
        step.pop("id")
    document["provenance"] = provenance
    return document


def test_exported_runs_imported_elsewhere_show_the_same_figures_and_verdicts(
    runs: Runs,
) -> None:
    howfast = runs.howfast
    exported = howfast.workdir / "runs.json"
    out = howfast("export", "json", runs.disk, runs.slower, "-o", str(exported))
    assert out.returncode == 0, out.stderr
    assert "wrote 2 runs to" in out.stderr
    other = howfast.workdir / "other.db"
    out = howfast("import", "run", str(exported), "--store", str(other), "--json")
    assert out.returncode == 0, out.stderr
    imported = json.loads(out.stdout)
    new_ids = [doc["id"] for doc in imported]
    assert len(new_ids) == 2
    originals = (runs.disk, runs.slower)
    documents = [shown_document(out) for out in howfast.together(
        *(show_argv(run_id) for run_id in originals),
        *(show_argv(run_id, other) for run_id in new_ids),
    )]  # fmt: skip
    for original, before, after in zip(originals, documents[:2], documents[2:], strict=True):
        hop = after.pop("provenance")
        before.pop("provenance")
        assert after == before  # every figure, series, warning and `why` verdict
        assert [h["source_run_id"] for h in hop] == [original]
        assert hop[0]["source_store"] == str(howfast.store)
        assert hop[0]["exported_by"].startswith("howfast ")
    # the gate judges the copies as it judged the originals
    out = howfast("compare", *new_ids, *GATE, "--store", str(other))
    assert out.returncode == 1, out.stdout + out.stderr


def test_rows_are_the_figures_and_samples_results_show_has(runs: Runs) -> None:
    howfast = runs.howfast
    document = shown(howfast, runs.disk)
    out = howfast("export", "csv", runs.disk)  # no -o: stdout
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    measured = [s for s in document["steps"] if s["workload"] == "pgbench"]
    tps_rows = [r for r in rows if r["metric"] == "tps"]
    assert [float(r["value"]) for r in tps_rows] == [s["metrics"]["tps"] for s in measured]
    assert [r["repetition"] for r in tps_rows] == ["1", "2", "3", "4", "5"]
    assert {(r["mode"], r["clients"], r["unit"], r["kind"]) for r in tps_rows} == {
        ("tpcb-like", "1", "tx/s", "local")
    }
    numeric = sum(
        1
        for s in document["steps"]
        for v in s["metrics"].values()
        if isinstance(v, int | float) and (not isinstance(v, float) or math.isfinite(v))
    )
    assert len(rows) == numeric

    path = howfast.workdir / "rows.ndjson"
    out = howfast("export", "ndjson", runs.disk, "--series", "-o", str(path))
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    samples = [row for row in lines if row["t_s"] is not None]
    points = sum(
        1
        for s in document["steps"]
        for series in s["series"].values()
        for _, value in series
        if value is not None
    )
    assert len(samples) == points
    # a reader that stops early (`| head`) ends the export quietly
    with subprocess.Popen(
        howfast.argv("export", "csv", runs.disk, "--series"), env=howfast.env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=howfast.workdir,
    ) as cut:  # fmt: skip
        assert cut.stdout is not None and cut.stderr is not None
        assert cut.stdout.readline().startswith("run,target,kind,")
        cut.stdout.close()
        assert cut.wait(timeout=120) == 0
        assert cut.stderr.read() == ""
    first_tps = measured[0]["series"]["tps"]
    assert [[r["t_s"], r["value"]] for r in samples if r["metric"] == "tps"][
        : len(first_tps)
    ] == first_tps


def test_bad_input_exits_2_and_stores_nothing(runs: Runs) -> None:
    howfast = runs.howfast
    out = howfast("export", "json", "999")
    assert out.returncode == 2 and "no run 999 in the store" in out.stderr
    out = howfast("export", "csv", runs.disk, "-o", str(howfast.workdir / "nowhere" / "x.csv"))
    assert out.returncode == 2 and "nowhere does not exist" in out.stderr
    other = howfast.workdir / "bad-imports.db"
    pgbench_text = howfast.workdir / "pgbench.txt"
    pgbench_text.write_text("tps = 512.3 (without initial connection time)\n")
    exported = howfast.workdir / "one.json"
    assert howfast("export", "json", runs.once, "-o", str(exported)).returncode == 0
    cut = howfast.workdir / "cut.json"
    cut.write_text(exported.read_text()[:5000])
    for source, said in (
        (pgbench_text, "not JSON"),
        (cut, "cut.json: not JSON"),
        (howfast.workdir / "missing.json", "no such file"),
    ):
        out = howfast("import", "run", str(source), "--store", str(other))
        assert out.returncode == 2, out.stderr
        assert said in out.stderr
    listed = howfast("results", "list", "--json", "--store", str(other))
    assert json.loads(listed.stdout) == []
