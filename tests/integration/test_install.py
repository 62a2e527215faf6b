"""howfast installed as a tool, the way a user installs it: the wheel `uv build` makes,
installed in a fresh virtual environment, then `howfast --version`, `howfast plans`, a dry
run, and `kubectl howfast` through a real kubectl; the krew archive's launcher; `doctor`'s
install commands for what is missing.

The fresh environment gets the locked dependencies from uv's cache (`uv sync --frozen
--no-install-project`, offline first), then the wheel without dependencies, then `uv pip
check` that the wheel's requirements hold: seconds, not minutes. Without uv (`make setup`
puts one in .tools/) these tests skip; they skip when the network is needed and missing,
saying so; any other failure fails them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from howfast import __version__

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NETWORK_ERRORS = (
    "network",
    "Failed to fetch",
    "dns error",
    "Connection refused",
    "connection error",
    "timed out",
    "not found in the cache",
)


def find_uv() -> Path | None:
    found = shutil.which("uv")
    local = ROOT / ".tools" / "bin" / "uv"
    return Path(found) if found else (local if local.is_file() else None)


def uv_run(uv: Path, *args: str, env: dict[str, str] | None = None) -> None:
    """uv, offline first (its cache has what `make setup` fetched), then online; skip with uv's
    own words when the network is needed and not there."""
    base = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", **(env or {})}
    offline = subprocess.run([str(uv), *args, "--offline"], env=base, capture_output=True,
                             text=True, timeout=600)  # fmt: skip
    if offline.returncode == 0:
        return
    online = subprocess.run([str(uv), *args], env=base, capture_output=True, text=True,
                            timeout=600)  # fmt: skip
    if online.returncode == 0:
        return
    said = online.stderr.strip()
    if any(text in said for text in NETWORK_ERRORS):
        pytest.skip(f"offline, and uv's cache lacks what `uv {args[0]}` needs: {said[-300:]}")
    raise AssertionError(f"uv {' '.join(args)} failed:\n{said}")


@dataclass
class Installed:
    uv: Path
    wheel: Path
    bin: Path  # the fresh environment's bin directory
    home: Path  # an empty HOME: no ~/.kube/config, no store of the developer's

    def env(self, path: str | None = None) -> dict[str, str]:
        # Python may write the fresh environment's bytecode: its first command compiles it,
        # the next ones start quicker (where PYTHONDONTWRITEBYTECODE is set, each would
        # compile every module again).
        drop = ("HOWFAST_", "KUBE", "PYTHONDONTWRITEBYTECODE")
        keep = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        return {**keep, "HOME": str(self.home), "PATH": path or f"{self.bin}:/usr/bin:/bin"}

    def run(self, *argv: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env(path), capture_output=True, text=True,
                              timeout=300, cwd=self.home)  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    uv = find_uv()
    if uv is None:
        pytest.skip("uv not found (on PATH or in .tools/): run `make setup-test` first")
    work = tmp_path_factory.mktemp("wheel")
    uv_run(uv, "build", "--wheel", "--out-dir", str(work / "dist"), str(ROOT))
    (wheel,) = (work / "dist").glob("howfast-*-py3-none-any.whl")
    venv = work / "venv"
    uv_run(uv, "sync", "--frozen", "--no-dev", "--no-install-project", "--project", str(ROOT),
           "--python", sys.executable, env={"UV_PROJECT_ENVIRONMENT": str(venv)})  # fmt: skip
    python = str(venv / "bin" / "python")
    uv_run(uv, "pip", "install", "--python", python, "--no-deps", str(wheel))
    check = subprocess.run([str(uv), "pip", "check", "--python", python], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr  # the wheel's requirements hold
    home = work / "home"
    home.mkdir()
    yield Installed(uv, wheel, venv / "bin", home)


def test_the_wheel_runs_from_a_fresh_environment(installed: Installed, tmp_path: Path) -> None:
    where = installed.run(
        str(installed.bin / "python"), "-c", "import howfast; print(howfast.__file__)"
    )
    assert where.returncode == 0, where.stderr
    assert "site-packages" in where.stdout and str(ROOT) not in where.stdout  # not the clone
    version = installed.run("howfast", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"howfast, version {__version__}")
    plans = installed.run("howfast", "plans")
    assert plans.returncode == 0, plans.stderr
    assert "quick" in plans.stdout and "sweep" in plans.stdout  # built-in plans are in the wheel
    target = tmp_path / "bench"
    target.mkdir()
    dry = installed.run("howfast", "run", "quick", "--target", str(target), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "pgbench -i" in dry.stdout and " -b select-only " in dry.stdout
    assert list(target.iterdir()) == []  # a dry run creates nothing
    assert not (installed.home / ".local" / "share" / "howfast").exists()  # nor a store


def lab_or_path_kubectl(private_dir: Path) -> Path:
    """The k8s lab's kubectl (tests/k8s/lab/config.py; the lab need not run), copied into
    `private_dir`, else one on the PATH. A copy: the lab's checks count any process running
    a binary of its bin/ as the lab's, and its `down` (beside this test, in the lab session)
    found this test's kubectl once."""
    from tests.k8s.lab.config import Paths

    lab = Paths.default().kubectl
    if lab.is_file() and os.access(lab, os.X_OK):
        private_dir.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copy2(lab, private_dir / "kubectl"))
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("no kubectl: neither the k8s lab's (make k8s-lab builds it) nor on PATH")
    return Path(found)


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: me, user: {token: not-used}}]
contexts:
  - {name: first, context: {cluster: lab, user: me, namespace: from-first}}
  - {name: second, context: {cluster: lab, user: me, namespace: from-second}}
current-context: first
"""


def namespaces(text: str) -> set[str]:
    return {line.split(":", 1)[1].strip() for line in text.splitlines()
            if line.strip().startswith("namespace:")}  # fmt: skip


def test_kubectl_howfast(installed: Installed, tmp_path: Path) -> None:
    kubectl = lab_or_path_kubectl(tmp_path / "kubectl-bin")
    path = f"{installed.bin}:{kubectl.parent}:/usr/bin:/bin"
    listed = installed.run(str(kubectl), "plugin", "list", path=path)
    assert listed.returncode == 0, listed.stderr
    assert str(installed.bin / "kubectl-howfast") in listed.stdout
    dry = ["howfast", "run", "quick", "--target", "k8s://lab-disk", "--dry-run"]
    # No cluster, no kubeconfig: a dry run needs neither.
    out = installed.run(str(kubectl), *dry, "-n", "bench", path=path)
    assert out.returncode == 0, out.stderr
    assert (
        "kind: PersistentVolumeClaim" in out.stdout and "storageClassName: lab-disk" in out.stdout
    )
    assert namespaces(out.stdout) == {"bench"}
    config = installed.home / "lab.kubeconfig"
    config.write_text(KUBECONFIG)
    out = installed.run(str(kubectl), *dry, "--kubeconfig", str(config), path=path)
    assert out.returncode == 0, out.stderr
    assert namespaces(out.stdout) == {"from-first"}  # the kubeconfig's current context
    out = installed.run(str(kubectl), *dry, f"--kubeconfig={config}", "--context", "second",
                        path=path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert namespaces(out.stdout) == {"from-second"}
    out = installed.run(str(kubectl), *dry, "--kubeconfig", "/nonexistent", path=path)
    assert out.returncode == 2
    assert "kubectl howfast: error: --kubeconfig /nonexistent: no such file" in out.stderr
    usage = installed.run(str(kubectl), "howfast", "--help", path=path)
    assert usage.stdout.startswith("Usage: kubectl howfast ")


def test_the_krew_archive_and_its_launcher(installed: Installed, tmp_path: Path) -> None:
    out = subprocess.run(
        [str(ROOT / "deploy/krew/archive.sh"), str(installed.wheel),
         "https://example.org/howfast-krew.tar.gz", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (archive,) = (tmp_path / "out").glob("howfast-krew-*.tar.gz")
    manifest = yaml.safe_load((tmp_path / "out" / "howfast.yaml").read_text())
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "howfast"
    assert manifest["spec"]["version"] == f"v{__version__}"
    (platform,) = manifest["spec"]["platforms"]
    import hashlib

    assert platform["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert platform["bin"] == "kubectl-howfast"
    assert "homepage" not in manifest["spec"]  # none given: none made up
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == sorted(["kubectl-howfast", installed.wheel.name])
        tar.extractall(tmp_path / "plugin", filter="data")
    # krew links the launcher into its bin directory
    bindir = tmp_path / "krew-bin"
    bindir.mkdir()
    (bindir / "kubectl-howfast").symlink_to(tmp_path / "plugin" / "kubectl-howfast")
    without = installed.run("kubectl-howfast", "--version", path=f"{bindir}:/usr/bin:/bin")
    assert without.returncode == 2 and "needs uv" in without.stderr
    path = f"{bindir}:{installed.uv.parent}:/usr/bin:/bin"
    launched = installed.run("kubectl-howfast", "--version", path=path)
    if launched.returncode != 0 and any(t in launched.stderr for t in NETWORK_ERRORS):
        pytest.skip(f"offline: uvx cannot resolve the wheel's dependencies: {launched.stderr}")
    assert launched.returncode == 0, launched.stderr
    assert launched.stdout.strip() == f"howfast, version {__version__}"


def test_doctor_prints_the_install_commands_of_what_is_missing(tmp_path: Path) -> None:
    """fio hidden from the PATH; a --pg-bin with PostgreSQL's server programs but no pgbench
    (a partial install), which doctor uses first."""
    partial = tmp_path / "pg-bin"
    partial.mkdir()
    from tests.conftest import pg_bindir

    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL installed here to make a partial copy of")
    for name in ("initdb", "pg_ctl", "postgres"):
        (partial / name).symlink_to(bindir / name)
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    argv = [sys.executable, "-m", "howfast", "doctor", "--pg-bin", str(partial)]
    out = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr  # pgbench is needed by every benchmark
    document = json.loads(out.stdout)
    checks = {c["name"]: c for c in document["checks"]}
    assert checks["fio"]["ok"] is False and checks["pgbench"]["ok"] is False
    commands = {c["family"]: c["command"] for c in document["install"]}
    assert commands == {
        "debian": "sudo apt-get install -y postgresql postgresql-contrib fio",
        "rhel": "sudo dnf install -y postgresql-contrib fio",
        "macos": "brew install postgresql@17 fio",
    }
    from howfast.service.install_hints import this_family

    here = this_family()
    assert [c["this_machine"] for c in document["install"]].count(True) == (here is not None)
    if here is not None:
        assert document["install"][0]["family"] == here
        fio_alone = {"debian": "sudo apt-get install -y fio", "rhel": "sudo dnf install -y fio",
                     "macos": "brew install fio"}  # fmt: skip
        assert checks["fio"]["hint"] == f"install it with: {fio_alone[here]}"
    text = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert "To install what is missing" in text.stdout
    for command in commands.values():
        assert command in text.stdout
    everything = subprocess.run([sys.executable, "-m", "howfast", "doctor", "--json"],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
    if json.loads(everything.stdout)["ok"] and shutil.which("fio"):
        assert json.loads(everything.stdout)["install"] == []  # nothing missing, nothing said
