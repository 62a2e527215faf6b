"""Every pod howfast builds for a real cluster passes the restricted Pod Security Standard, as
Kubernetes' own admission library evaluates it (k8s.io/pod-security-admission, the version of
the test lab, run by psacheck/main.go); the lab's host-network mode fails it for hostNetwork
alone, which is why it is a lab-only setting.

No cluster is needed, but the Go toolchain and the lab's Go module cache are (the lab's build
fills it): without them the test is skipped, and the lab's server-side dry run in a restricted
namespace is the check. The checker is built once per machine (~80 s on 2 loaded cores; kept in
the user's cache directory).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from howfast.targets.k8s import client_manifests as cm
from howfast.targets.k8s import manifests as m
from howfast.targets.k8s import network as net
from howfast.targets.k8s import standby_manifests as sm
from howfast.targets.k8s.spec import K8sOptions, parse_target
from tests.k8s.lab.config import Paths, cache_root

SOURCE = Path(__file__).resolve().parent / "psacheck"
MODULE = "k8s.io/pod-security-admission@v0.34.4"
# The first test on a machine that needs the checker builds it, the others wait for it: 3 s
# when the lab's build cache holds the packages, minutes when it does not (192 s at a load of
# 15 on 2 cores with a cache of its own), more than the suite's 300 s time-out allows on a
# busier machine. Every test that calls _evaluate is marked with it.
BUILDS_CHECKER = pytest.mark.timeout(900)


def _checker() -> Path:
    from tests.k8s.lab.build import go_binary  # not at collection: it loads the lab's builder

    go = go_binary()
    paths = Paths.default()
    modcache = paths.gomodcache
    if go is None or not (modcache / MODULE).is_dir():
        pytest.skip(f"needs the Go toolchain and {MODULE} in the lab's module cache ({modcache})")
    digest = hashlib.sha256(
        b"".join((SOURCE / f).read_bytes() for f in ("main.go", "go.mod", "go.sum"))
    ).hexdigest()[:12]
    build = cache_root().parent / "psacheck" / digest
    binary = build / "psacheck"
    if binary.exists():  # the build directory appears whole (renamed into place) or not at all
        return binary
    build.parent.mkdir(parents=True, exist_ok=True)
    # pytest-xdist workers (and two suites at once) may all need it first: one builds, under
    # the lock, the others wait for it and find it built.
    with open(build.with_name(f"{digest}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            _build_checker(go, paths, build)
    return binary


def _build_checker(go: Path, paths: Paths, build: Path) -> None:
    """Built in a directory of its own, renamed to `build` once complete; called under the
    lock, so what an interrupted build left can go. (Not where the checkouts that built it
    without a lock did, `psacheck-DIGEST`: they removed that directory at will.)"""
    from tests.k8s.lab.build import go_env

    for leftover in [build, *build.parent.glob(f".{build.name}-*")]:
        shutil.rmtree(leftover, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=f".{build.name}-", dir=build.parent))
    try:
        shutil.copytree(SOURCE, work / "src")  # go may write beside its sources: never in the clone
        # The lab's Go environment (its build cache and build settings): the standard library
        # and the k8s.io packages the lab compiled are reused. With a cache of its own, at
        # nice 10, the build took over 6 min beside two busy loops at the end of a fresh run,
        # the other tests of this file waiting for it. Go's build cache is safe to share
        # between builds at once. Offline: nothing is downloaded, the module cache is read.
        lab = go_env(paths)
        env = {
            **lab,
            "GOPROXY": "off",
            "GOSUMDB": "off",
            "GOFLAGS": f"{lab['GOFLAGS']} -mod=readonly",
        }
        out = subprocess.run(
            [go, "build", "-o", str(work / "psacheck"), "."],
            cwd=work / "src", env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if out.returncode != 0:
            pytest.fail(f"building psacheck failed:\n{out.stderr}")
        work.rename(build)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone already when renamed


def _evaluate(pods: list[dict[str, Any]]) -> dict[str, str]:
    text = "\n".join(json.dumps(p) for p in pods) + "\n"
    out = subprocess.run(
        [str(_checker())], input=text, capture_output=True, text=True, check=False, timeout=60
    )
    verdicts = {}
    for line in out.stdout.splitlines():
        verdict, _, rest = line.partition(" ")
        name, _, detail = rest.partition(": ")
        verdicts[name] = verdict if verdict == "ok" else detail
    assert len(verdicts) == len(pods), out.stderr
    return verdicts


def _pods(mode: net.NetworkMode) -> list[dict[str, Any]]:
    run = m.Plan(
        "abc123", "bench", parse_target("k8s://fast?wal=slow"),
        K8sOptions(cpu="1", memory_bytes=2**30), net.SERVER_PORT,
    )  # fmt: skip
    primary = net.addresses(run.name, mode, 1, {"primary": 41000})["primary"]
    standby = sm.StandbyPlan(run, 1, mode, primary, host_port=41001)
    pods = [
        net.place_pod(m.pod(run, None), mode, "primary", hostname="primary"),
        sm.pod(standby, None),
        cm.client_pod(run, mode, None, node="n2"),
    ]
    for pod in pods:
        pod["metadata"]["name"] += f"-{mode}"
    return pods


@BUILDS_CHECKER
def test_pod_mode_pods_pass_the_restricted_standard() -> None:
    verdicts = _evaluate(_pods("pod"))
    assert verdicts == {
        "howfast-abc123-pod": "ok",
        "howfast-abc123-standby-1-pod": "ok",
        "howfast-abc123-client-pod": "ok",
    }


@BUILDS_CHECKER
def test_host_mode_pods_fail_it_for_the_host_network_only() -> None:
    verdicts = _evaluate(_pods("host"))
    assert set(verdicts) == {
        "howfast-abc123-host", "howfast-abc123-standby-1-host", "howfast-abc123-client-host",
    }  # fmt: skip
    for name, detail in verdicts.items():
        assert detail == "host namespaces (hostNetwork=true)", name
