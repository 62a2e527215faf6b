"""Golden outputs: what howfast shows of a few fixed runs, recorded in tests/data/documents/
so that a change that should change nothing users see (issue 27's module moves) proves it.

Each case is a run stored in a fresh store: built with tests/unit/stored_runs.py's records, or
imported from a recorded pgbench or fio output of tests/data. For each, three files:
- NAME.json: the document `results show ID --json` prints (cli/reading.run_document of the
  derived run);
- NAME.txt: the text `results show ID` prints, 120 columns, no colour;
- NAME.prom: `export prometheus ID`'s text.

tests/unit/test_goldens.py compares today's outputs to them. They are never rewritten by a
test. When a change is meant to change what users see, regenerate them on purpose and commit
them with the change, after reading the diff:

    .venv/bin/python -m tests.unit.goldens write
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from unittest import mock

from rich.console import Console

from howfast.analysis import steady
from howfast.import_text import open_source
from howfast.metrics.textfile import render_run
from howfast.model import JSONValue, Sample, StepRecord, TargetRecord
from howfast.report import terminal
from howfast.service import importer
from howfast.service.reading import read_run, run_document
from howfast.store import SqlStore, open_store
from tests.unit.stored_runs import DEVICE, ENVIRONMENT, STARTED, fio, init, pgbench, store_run

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
GOLDEN_DIR = DATA / "documents"
IMPORTED_AT = "2026-02-01T09:00:00.000+00:00"  # the clock of imports, fixed
SUFFIXES = (".json", ".txt", ".prom")


# -- runs built from records -------------------------------------------------------------------

RAMP = [500.0, 800.0] + [1000.0, 1010.0, 990.0, 1000.0] * 3
IN_MEMORY = "the dataset fits in memory: this is not an on-disk test"


def _sampled(step: StepRecord) -> StepRecord:
    step.series["io.data.write_iops"] = [Sample(float(t), 200.0 + t) for t in range(1, 15)]
    step.series["io.wal.write_mbps"] = [Sample(float(t), 3.5) for t in range(1, 15)]
    checkpoints = [{"reason": "wal", "start_t": 4.0, "end_t": 9.5}]
    return replace(step, sections={"postgres": {"checkpoints": checkpoints}})


def sweep(db: SqlStore) -> int:
    """Two directories: loads, a warm-up, tpcb-like three times on each, the storage probe."""
    steps = [init("/mnt/a", 10.0), init("/mnt/b", 14.0), pgbench("/mnt/a", 400.0, warmup=True)]
    for i, tps in enumerate([1000.0, 1010.0, 990.0], start=1):
        step = pgbench("/mnt/a", tps, repetition=i, per_second=RAMP,
                       warnings=[IN_MEMORY] if i == 2 else [])  # fmt: skip
        steps.append(_sampled(step) if i == 1 else step)
    steps += [pgbench("/mnt/b", t, repetition=i) for i, t in enumerate([700.0, 800.0, 600.0], 1)]
    steps += [pgbench("/mnt/a", 300.0, clients=1), pgbench("/mnt/a", 2500.0, clients=16,
              mode="select-only")]  # fmt: skip
    steps += [
        fio("/mnt/a", "rand-read-4k-qd64", read_iops=45000.0, read_mbps=175.8, read_lat_avg_ms=1.4),
        fio("/mnt/a", "randrw-4k-qd1", read_iops=2100.0, write_iops=2095.0,
            read_lat_avg_ms=0.21, write_lat_avg_ms=0.26),
        fio("/mnt/a", "wal-fsync", write_iops=900.0, write_lat_avg_ms=0.05, sync_lat_avg_ms=1.0,
            commit_ceiling_tps=952.4),
    ]  # fmt: skip
    return store_run(db, steps, targets=["/mnt/a", "/mnt/b"], label="nvme vs ceph")


# Offered rate -> (achieved TPS, p99 ms, lag ms)
CURVE = {100.0: (100.0, 2.0, 0.1), 200.0: (199.0, 2.1, 0.2), 300.0: (297.0, 2.2, 0.3),
         400.0: (330.0, 40.0, 900.0)}  # fmt: skip


def _curve(target: str) -> list[StepRecord]:
    steps = [pgbench(target, 350.0, curve_role="max", slo="p99=10ms")]
    for rate, (tps, p99, lag) in CURVE.items():
        step = pgbench(target, tps, rate=rate, slo="p99=10ms")
        step.metrics.update(latency_p99_ms=p99, schedule_lag_avg_ms=lag)
        steps.append(step)
    steps[-1].params["curve_last"] = True
    return steps


def rate_curve(db: SqlStore) -> int:
    """A latency curve (rates up to past saturation, an SLO) on two directories."""
    return store_run(db, _curve("/mnt/a") + _curve("/mnt/b"), targets=["/mnt/a", "/mnt/b"])


DISK: dict[str, JSONValue] = {
    "fstype": "ext4",
    "source": "/dev/nvme0n1p2",
    "device": {"name": "nvme0n1p2", "disk": "nvme0n1", "rotational": False,
               "write_cache": "write back", "driver": "nvme"},
}  # fmt: skip
SAFE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on",
        "wal_sync_method": "fdatasync", "shared_buffers": "1GB", "port": "5432"}  # fmt: skip


def _wal_probe(target: str, ms: float) -> StepRecord:
    step = fio(target, "wal-fsync", write_lat_avg_ms=0.02, sync_lat_avg_ms=ms)
    return replace(step, resolved={"flushes_every_write": True})


def durability(db: SqlStore) -> int:
    """A disk and a replicated Kubernetes volume: verdicts, advice, one step run unsafely."""
    run_id = db.create_run("quick", ENVIRONMENT, STARTED, label="durability")
    device = {"data": DISK, "wal": DISK, "wal_on_data_device": True}
    db.add_target(run_id, TargetRecord("/mnt/a", "local", "16.4", dict(SAFE), device, "/mnt/a"))
    volume: dict[str, JSONValue] = {
        "kind": "StorageClass longhorn",
        "fstype": "ext4",
        "storage_class": {"name": "longhorn", "provisioner": "driver.longhorn.io"},
    }
    k8s_device: dict[str, JSONValue] = {"data": volume, "wal": dict(volume),
        "wal_on_data_device": True, "kubernetes": {"node": {"kernel": "6.1.0"}}}  # fmt: skip
    db.add_target(run_id, TargetRecord("k8s://longhorn", "k8s", "16.4", dict(SAFE), k8s_device))
    unsafe = pgbench("/mnt/a", 900.0, clients=1)
    unsafe = replace(
        unsafe, sections={"postgres": {"settings": {"fsync": "off", "synchronous_commit": "off"}}}
    )
    steps = [
        _wal_probe("/mnt/a", 0.7),
        pgbench("/mnt/a", 400.0, clients=1),
        unsafe,
        _wal_probe("k8s://longhorn", 0.4),
        pgbench("k8s://longhorn", 150.0, clients=8),
    ]
    for step in steps:
        db.add_step(run_id, step)
    db.finish_run(run_id, "completed", "2026-01-01T10:30:00+00:00")
    return run_id


def _fleet_step(klass: str, n: int, tps: float, p99: float, writes: int, limit: int) -> StepRecord:
    params: dict[str, JSONValue] = {"mode": "tpcb-like", "clients": 2, "duration_s": 3,
        "scenario": "classes", "class": klass, "instance": n,
        "io_limits": {"read_iops": limit, "write_iops": limit}}  # fmt: skip
    resolved: dict[str, JSONValue] = {"own_read_ios": 0, "own_write_ios": writes,
                                      "own_io_seconds": 3.0}  # fmt: skip
    metrics: dict[str, JSONValue] = {"tps": tps, "latency_p50_ms": p99 / 4, "latency_p99_ms": p99}
    return StepRecord(f"/mnt/f classes/{klass}-{n}", "pgbench", params, "completed", STARTED,
                      STARTED, metrics=metrics, resolved=resolved)  # fmt: skip


def fleet(db: SqlStore) -> int:
    """A fleet: two classes of two instances with I/O limits, one starved."""
    steps = [
        _fleet_step("high", 1, 700.0, 10.0, 4200, 2000),
        _fleet_step("high", 2, 740.0, 9.0, 4500, 2000),
        _fleet_step("best-effort", 1, 60.0, 110.0, 450, 150),
        _fleet_step("best-effort", 2, 61.0, 104.0, 449, 150),
    ]
    run_id = db.create_run("fleet", ENVIRONMENT, STARTED)
    for name in dict.fromkeys(s.target for s in steps):
        db.add_target(run_id, TargetRecord(name, "local", "16.4", {}, DEVICE, "/mnt/f"))
    for step in steps:
        db.add_step(run_id, step)
    db.finish_run(run_id, "completed", "2026-01-01T10:30:00+00:00")
    return run_id


UNTIL = {"ci": 0.05, "min": 3, "max": 6, "budget_s": None}


def until(db: SqlStore) -> int:
    """`--until ci=5%`: one test reached the width on both targets, one did not."""
    steps = []
    for r, (a, b) in enumerate([(1000.0, 2000.0), (1010.0, 2010.0), (990.0, 1990.0)], start=1):
        steps += [pgbench(t, v, repetition=r, mode="select-only", until=UNTIL)
                  for t, v in (("/mnt/a", a), ("/mnt/b", b))]  # fmt: skip
    for r, (a, b) in enumerate([(100.0, 200.0), (150.0, 250.0), (70.0, 130.0)], start=1):
        steps += [pgbench(t, v, clients=8, repetition=r, until=UNTIL)
                  for t, v in (("/mnt/a", a), ("/mnt/b", b))]  # fmt: skip
    return store_run(db, steps, targets=["/mnt/a", "/mnt/b"])


def failed(db: SqlStore) -> int:
    """A run that failed: a load that failed with the server's log, the steps it skipped."""
    load = replace(
        init("/mnt/a", 3.0),
        status="failed",
        metrics={},
        error="pgbench -i exited with 1: ERROR:  could not extend file: No space left",
    )
    skipped = replace(
        pgbench("/mnt/a", 1.0),
        status="skipped",
        metrics={},
        error="the load before it failed (step 1)",
    )
    run_id = store_run(db, [fio("/mnt/a", "seq-write-8k-qd32", write_mbps=410.0), load, skipped])
    db.finish_run(run_id, "failed", "2026-01-01T10:30:00+00:00")
    return run_id


# -- runs imported from recorded outputs ---------------------------------------------------------


def imported(kind: str, name: str) -> Callable[[SqlStore], int]:
    """`howfast import KIND` of a recorded output (kind: pgbench, fio)."""

    def store(db: SqlStore) -> int:
        text = open_source(str(DATA / kind / name), None)
        with mock.patch.object(importer, "now", lambda: IMPORTED_AT):
            read = importer.importer_for(kind)
            return importer.import_output(db, read, text, source_name=name, label=None)

    return store


CASES: dict[str, Callable[[SqlStore], int]] = {
    "sweep": sweep,
    "rate-curve": rate_curve,
    "durability": durability,
    "fleet": fleet,
    "until": until,
    "failed": failed,
    **{
        f"import-pgbench-{Path(name).stem}": imported("pgbench", name)
        for name in (
            "run-tpcb-pg15.txt",
            "init-client-pg15.txt",
            "kubectl-init-and-run-pg16.txt",
            "multi-rate-curve-pg15.txt",
            "multi-four-runs-pg15.txt",
            "run-retries-pg17.txt",
            "run-select-only-pg15.txt",
            "run-aborted-pg13.txt",
        )
    },
    **{
        f"import-fio-{Path(name).stem}": imported("fio", name)
        for name in (
            "fio-3.33_wal-fsync.json",
            "fio-3.33_randrw-4k-qd1.json",
            "fio-3.33_rand-read-4k-qd64.json",
            "fio-3.33_seq-write-8k-qd32.json",
            "fio-2.15_constructed.json",
        )
    },
}


# -- what howfast shows of them ------------------------------------------------------------------


@dataclass(frozen=True)
class Outputs:
    document: str
    show: str
    prometheus: str

    def by_suffix(self) -> dict[str, str]:
        return dict(zip(SUFFIXES, (self.document, self.show, self.prometheus), strict=True))


@contextmanager
def _store() -> Iterator[SqlStore]:
    with tempfile.TemporaryDirectory() as tmp:
        db = open_store(str(Path(tmp) / "results.db"))
        try:
            yield db
        finally:
            db.close()


def outputs(name: str) -> Outputs:
    """What `results show --json`, `results show` and `export prometheus` print of case `name`."""
    with _store() as db:
        run_id = CASES[name](db)
        as_json = read_run(db, run_id)
        for_people = read_run(db, run_id, series=steady.SERIES, for_people=True)
        with_series = read_run(db, run_id, all_series=True)
    assert as_json is not None and for_people is not None and with_series is not None
    out = io.StringIO()
    console = Console(file=out, width=120, color_system=None, highlight=False, soft_wrap=False,
                      markup=False)  # fmt: skip
    console.print(terminal.run_details(for_people))
    document = json.dumps(run_document(as_json), indent=2, sort_keys=False) + "\n"
    return Outputs(document, out.getvalue(), render_run(with_series))


def golden(name: str) -> Outputs:
    texts = [(GOLDEN_DIR / f"{name}{suffix}").read_text() for suffix in SUFFIXES]
    return Outputs(*texts)


def write() -> None:
    GOLDEN_DIR.mkdir(exist_ok=True)
    for name in CASES:
        for suffix, text in outputs(name).by_suffix().items():
            (GOLDEN_DIR / f"{name}{suffix}").write_text(text)
        print(f"wrote {GOLDEN_DIR.relative_to(ROOT)}/{name}.{{json,txt,prom}}")


if __name__ == "__main__":
    if sys.argv[1:] != ["write"]:
        sys.exit(f"usage: {sys.executable} -m tests.unit.goldens write")
    write()
