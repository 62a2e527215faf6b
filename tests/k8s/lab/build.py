"""Build (or find already built) everything the lab runs, in the user's cache directory.

Sources, and nothing else: Debian packages (apt-get, debootstrap) and the Go module proxy.
- Kubernetes: the Go module k8s.io/kubernetes, built through a wrapper module whose go.mod
  replaces each k8s.io staging module by its published release (k8s.io/kubernetes itself
  replaces them with local paths, which `go install module@version` refuses).
- local-path-provisioner: `go install` of its module.
- CoreDNS: a wrapper module of its Go module with the lab's plugins only (coredns.py).
- pause and the lo-only CNI plugin (no longer used by the lab, still built: another
  checkout's lab code shares this cache): small Go programs in tests/k8s/lab/go.
- The PostgreSQL 15 + pgbench + fio image: a debootstrap root filesystem, packed as an image.
A cold build takes ~15 min on 2 cores; afterwards every step finds its output and takes no time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time
from pathlib import Path

from tests.k8s.lab import config, coredns, image, pki
from tests.k8s.lab.config import Paths
from tests.k8s.lab.proc import LabError, LabUnavailable, locked, log, run

GO_MIN = (1, 24)
GOPROXY = "https://proxy.golang.org"
# Bump when the image recipe changes in a way the stamp below cannot see.
IMAGE_RECIPE = 1


# --- what this machine can do ------------------------------------------------------------------


def missing_packages() -> list[str]:
    missing = []
    for pkg in config.HOST_PACKAGES:
        proc = run(["dpkg-query", "-W", "-f=${Status}", pkg], check=False)
        if proc.returncode != 0 or "install ok installed" not in proc.stdout:
            missing.append(pkg)
    return missing


def go_binary() -> Path | None:
    found = shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None
    )
    return Path(found) if found else None


def go_version(go: Path) -> tuple[int, int] | None:
    proc = run([go, "env", "GOVERSION"], check=False, env={**os.environ, "GOTOOLCHAIN": "local"})
    m = re.match(r"go(\d+)\.(\d+)", proc.stdout.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_built(paths: Paths) -> bool:
    return not _missing_outputs(paths)


def _missing_outputs(paths: Paths) -> list[str]:
    wanted = [paths.bin / b for b in (*config.K8S_BINARIES, "local-path-provisioner")]
    wanted += [paths.bin / "pause", paths.bin / "lo-only"]
    wanted += [paths.images / "pause.tar", paths.images / "pgfio.tar", paths.pki / ".complete"]
    missing = [str(p) for p in wanted if not p.exists()]
    if not _stamp_ok(paths.images / "pgfio.stamp", _image_recipe()):
        missing.append("pgfio image of the current recipe")
    if not _stamp_ok(paths.bin / "small.stamp", _small_sources_digest()):
        missing.append("pause/lo-only of the current sources")
    if not coredns.is_built(paths):
        missing.append(f"CoreDNS {config.COREDNS_VERSION} and its image")
    if not pki.network_pki_ok(paths.pki):
        missing.append("certificates of the pod network (API server's addresses, kube-proxy)")
    return missing


def build_blockers(paths: Paths) -> str | None:
    """Why a build cannot run here, or None. Only what the missing outputs need is checked."""
    if os.name != "posix" or not Path("/proc/self/mountinfo").exists():
        return "the k8s lab needs Linux"
    if os.geteuid() != 0:
        return "the k8s lab needs root (it runs containerd, the kubelet and debootstrap)"
    if missing_packages() and shutil.which("apt-get") is None:
        return f"missing Debian packages {missing_packages()} and no apt-get to install them"
    needs_go = (
        any(
            not (paths.bin / b).exists()
            for b in (*config.K8S_BINARIES, "local-path-provisioner", "pause", "lo-only")
        )
        or not _stamp_ok(paths.bin / "small.stamp", _small_sources_digest())
        or not coredns.is_built(paths)
    )
    if needs_go:
        go = go_binary()
        if go is None:
            return "no Go toolchain on PATH (needed once to build Kubernetes)"
        version = go_version(go)
        if version is None or version < GO_MIN:
            return f"Go >= {GO_MIN[0]}.{GO_MIN[1]} is needed to build Kubernetes, found {version}"
    if not (paths.images / "pgfio.tar").exists() or not (paths.bin / "kubelet").exists():
        paths.root.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(paths.root).free
        if free < 6 << 30:
            return f"a cold build needs ~6 GB free in {paths.root}, only {free >> 20} MB"
    return None


# --- stamps: a digest of what an output was built from -----------------------------------------


def _stamp_ok(stamp: Path, digest: str) -> bool:
    try:
        return stamp.read_text().strip() == digest
    except OSError:
        return False


def _small_sources_digest() -> str:
    h = hashlib.sha256()
    for src in sorted(config.GO_SOURCES.rglob("*")):
        if src.is_file():
            h.update(str(src.relative_to(config.GO_SOURCES)).encode())
            h.update(src.read_bytes())
    return h.hexdigest()


def _image_recipe() -> str:
    recipe = [
        str(IMAGE_RECIPE),
        config.DEBIAN_SUITE,
        *config.IMAGE_PACKAGES,
        str(config.PG_UID),
        str(config.PG_GID),
        config.PG_IMAGE,
    ]
    return hashlib.sha256("\n".join(recipe).encode()).hexdigest()


# --- steps -------------------------------------------------------------------------------------


def install_packages(paths: Paths) -> None:
    missing = missing_packages()
    if not missing:
        return
    log(f"apt-get install {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Packages like etcd-server would start their service on install: forbid that for the
    # duration of the install (the lab runs its own processes), unless a policy already exists.
    policy = Path("/usr/sbin/policy-rc.d")
    made_policy = not policy.exists()
    if made_policy:
        policy.write_text(
            "#!/bin/sh\n# howfast k8s lab: no service starts during apt-get\nexit 101\n"
        )
        policy.chmod(0o755)
    try:
        run(["apt-get", "update", "-qq"], env=env, log_file=paths.logs / "apt.log")
        run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
            env=env,
            log_file=paths.logs / "apt.log",
        )
    finally:
        if made_policy:
            policy.unlink()


def go_env(paths: Paths) -> dict[str, str]:
    go = go_binary()
    assert go is not None
    env = dict(os.environ)
    env.update(
        {
            "PATH": f"{go.parent}:{env.get('PATH', '/usr/bin:/bin')}",
            "GOMODCACHE": str(paths.gomodcache),
            "GOCACHE": str(paths.gocache),
            "GOPATH": str(paths.go_root / "path"),
            "GOFLAGS": "-trimpath -modcacherw -buildvcs=false",
            "CGO_ENABLED": "0",
            "GOTOOLCHAIN": "local",  # never download a toolchain
            "GOPROXY": os.environ.get("HOWFAST_K8S_LAB_GOPROXY", GOPROXY),  # no VCS fallback
        }
    )
    return env


def _nice(argv: list[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """Builds share the machine: run them at a lower priority (config.build_nice)."""
    return [*config.build_nice(), *argv]


def _write_wrapper_module(paths: Paths, env: dict[str, str]) -> None:
    """go.mod + tools.go of a module that requires k8s.io/kubernetes at K8S_VERSION, importing
    every command the lab builds. `.complete` lists them: a command added later (kube-proxy,
    whose dependencies the first five lack in go.sum) makes `go mod tidy` run again."""
    gomod = paths.gomod
    wanted = "\n".join(config.K8S_BINARIES) + "\n"
    done = gomod / ".complete"
    if (gomod / "go.sum").exists() and done.exists() and done.read_text() in ("ok\n", wanted):
        if done.read_text() == wanted:
            return
        _write_tools_go(gomod)  # an older wrapper: same go.mod, more commands
        log("go mod tidy (commands added to the wrapper module)")
        run(["go", "mod", "tidy"], env=env, cwd=gomod, log_file=paths.logs / "go-mod.log")
        done.write_text(wanted)
        return
    gomod.mkdir(parents=True, exist_ok=True)
    version = f"v{config.K8S_VERSION}"
    staging = "v0." + config.K8S_VERSION.split(".", 1)[1]
    log(f"go mod download k8s.io/kubernetes@{version}")
    proc = run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        env=env,
        cwd=gomod,
    )
    upstream = Path(json.loads(proc.stdout)["GoMod"]).read_text()
    go_line = re.search(r"^go (\S+)$", upstream, re.M)
    godebug = re.findall(r"^godebug .*$", upstream, re.M)
    replaced = sorted(set(re.findall(r"^\s*(k8s\.io/\S+)\s+=>\s+\./staging/", upstream, re.M)))
    if not replaced:
        raise LabError("found no staging replace directives in k8s.io/kubernetes's go.mod")
    lines = [
        "module howfast.lab/k8sbuild",
        "",
        f"go {go_line.group(1) if go_line else '1.24.0'}",
        "",
        *godebug,
        "",
        f"require k8s.io/kubernetes {version}",
        "",
        "replace (",
        *[f"\t{mod} => {mod} {staging}" for mod in replaced],
        ")",
        "",
    ]
    (gomod / "go.mod").write_text("\n".join(lines))
    _write_tools_go(gomod)
    log(f"go mod tidy ({len(replaced)} staging modules pinned to {staging})")
    run(["go", "mod", "tidy"], env=env, cwd=gomod, log_file=paths.logs / "go-mod.log")
    done.write_text(wanted)


def _write_tools_go(gomod: Path) -> None:
    imports = "\n".join(f'\t_ "k8s.io/kubernetes/cmd/{b}"' for b in config.K8S_BINARIES)
    (gomod / "tools.go").write_text(
        f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"
    )


def build_kubernetes(paths: Paths) -> None:
    """The Kubernetes commands that are missing (all of them on a cold build; kube-proxy alone
    in a cache made before the lab had a pod network)."""
    missing = [b for b in config.K8S_BINARIES if not (paths.bin / b).exists()]
    if not missing:
        return
    env = go_env(paths)
    _write_wrapper_module(paths, env)
    major, minor = config.K8S_VERSION.split(".")[:2]
    ldflags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        ldflags += [
            f"-X {pkg}.gitVersion=v{config.K8S_VERSION}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    out = paths.bin / ".partial-k8s"
    out.mkdir(parents=True, exist_ok=True)
    log(
        f"go build Kubernetes {config.K8S_VERSION}: {', '.join(missing)}"
        " (cold, all of them: ~13 min on 2 cores; log: build-k8s.log)"
    )
    t0 = time.monotonic()
    argv: list[str | os.PathLike[str]] = ["go", "build", f"-ldflags={' '.join(ldflags)}"]
    argv += ["-o", f"{out}/", *[f"k8s.io/kubernetes/cmd/{b}" for b in missing]]
    run(_nice(argv), env=env, cwd=paths.gomod, log_file=paths.logs / "build-k8s.log")
    for b in missing:
        (out / b).replace(paths.bin / b)
    out.rmdir()
    log(f"Kubernetes binaries built in {time.monotonic() - t0:.0f}s")


def build_provisioner(paths: Paths) -> None:
    target = paths.bin / "local-path-provisioner"
    if target.exists():
        return
    env = go_env(paths)
    partial = paths.bin / ".partial-lpp"
    partial.mkdir(parents=True, exist_ok=True)
    env["GOBIN"] = str(partial)
    module = f"github.com/rancher/local-path-provisioner@{config.LOCAL_PATH_PROVISIONER_VERSION}"
    log(f"go install {module}")
    t0 = time.monotonic()
    run(
        _nice(["go", "install", "-ldflags=-s -w", module]),
        env=env,
        cwd=paths.root,
        log_file=paths.logs / "build-provisioner.log",
    )
    (partial / "local-path-provisioner").replace(target)
    partial.rmdir()
    log(f"local-path-provisioner built in {time.monotonic() - t0:.0f}s")


def build_small(paths: Paths) -> None:
    """pause and lo-only, from tests/k8s/lab/go (seconds)."""
    digest = _small_sources_digest()
    stamp = paths.bin / "small.stamp"
    if _stamp_ok(stamp, digest) and (paths.bin / "pause").exists():
        return
    env = go_env(paths)
    log("go build pause, lo-only")
    run(
        _nice(["go", "build", "-ldflags=-s -w", "-o", f"{paths.bin}/", "./pause", "./lo-only"]),
        env=env,
        cwd=config.GO_SOURCES,
        log_file=paths.logs / "build-small.log",
    )
    stamp.write_text(digest + "\n")
    (paths.images / "pause.tar").unlink(missing_ok=True)


def build_pause_image(paths: Paths) -> None:
    out = paths.images / "pause.tar"
    if out.exists():
        return
    rootfs = paths.images / "pause-rootfs"
    image.build_pause_rootfs(rootfs, paths.bin / "pause")
    image.pack_image(rootfs, config.PAUSE_IMAGE, out, entrypoint=["/pause"])
    shutil.rmtree(rootfs)


def build_pg_image(paths: Paths) -> None:
    out, stamp = paths.images / "pgfio.tar", paths.images / "pgfio.stamp"
    recipe = _image_recipe()
    if out.exists() and _stamp_ok(stamp, recipe):
        return
    t0 = time.monotonic()
    rootfs = paths.images / "pgfio-rootfs"
    image.build_pg_rootfs(rootfs, paths.logs / "debootstrap.log")
    image.pack_image(
        rootfs,
        config.PG_IMAGE,
        out,
        cmd=["/bin/bash"],
        user=f"{config.PG_UID}:{config.PG_GID}",
        env={"PATH": f"{config.PG_BINDIR}:{image.DEFAULT_PATH}"},
    )
    shutil.rmtree(rootfs)
    stamp.write_text(recipe + "\n")
    size_mb = out.stat().st_size >> 20
    log(f"image {config.PG_IMAGE} built in {time.monotonic() - t0:.0f}s ({size_mb} MB)")


def ensure_built(paths: Paths | None = None) -> Paths:
    """Build whatever is missing; return at once when everything is there. One build at a
    time on the machine (every checkout shares it): under a lock beside the lab's directory."""
    paths = paths or Paths.default()
    if not _missing_outputs(paths):
        return paths
    with locked(paths.root.with_name(paths.root.name + ".build.lock"), "the k8s lab"):
        return _build_missing(paths)


def _build_missing(paths: Paths) -> Paths:
    missing = _missing_outputs(paths)
    if not missing:
        return paths
    blocker = build_blockers(paths)
    if blocker:
        raise LabUnavailable(blocker)
    t0 = time.monotonic()
    log(f"building into {paths.root}: {len(missing)} outputs missing")
    for d in (paths.bin, paths.images, paths.logs):
        d.mkdir(parents=True, exist_ok=True)
    install_packages(paths)
    # The image build waits on the network, the Go build on the CPU: run them side by side.
    image_error: list[BaseException] = []

    def image_job() -> None:
        try:
            build_pg_image(paths)
        except BaseException as exc:  # reported by the main thread
            image_error.append(exc)

    image_thread = threading.Thread(target=image_job, name="pg-image")
    image_thread.start()
    try:
        build_small(paths)
        build_pause_image(paths)
        build_kubernetes(paths)
        build_provisioner(paths)
        coredns.build(paths, go_env(paths), config.build_nice())
        coredns.build_image(paths)
        pki.ensure_pki(paths.pki)
        pki.ensure_network_pki(paths.pki)
    finally:
        image_thread.join()
    if image_error:
        raise LabError(f"building the PostgreSQL image failed: {image_error[0]}") from image_error[
            0
        ]
    still = _missing_outputs(paths)
    if still:
        raise LabError(f"build finished but outputs are missing: {still}")
    log(f"build complete in {time.monotonic() - t0:.0f}s")
    return paths
