"""howfast's image built from deploy/Dockerfile.howfast itself, the way users build it, with
buildah (Debian's package: no daemon), on the lab's Debian base instead of Docker Hub's.

    k8s-1.34.4/images/debian-base.tar     localhost/debian:bookworm-minbase: debootstrap
                                          --variant=minbase bookworm (the lab's Debian base;
                                          it stands for the Dockerfile's debian:bookworm-slim,
                                          passed as --build-arg BASE=...)
    k8s-1.34.4/buildah/{root,runroot}     buildah's own storage (never /var/lib/containers)
    k8s-1.34.4/images/howfast-dockerfile-KEY.tar
                                          the built image (docker-archive), tagged
                                          localhost/howfast-dockerfile:KEY; KEY: the Dockerfile's,
                                          the wheel's and the locked requirements' digests

The build context is what the Dockerfile's header says to make: the wheel (`uv build`) and
`uv export`'s requirements.txt. Its RUN steps fetch from Debian's mirror (apt-get) and PyPI
(pip), as a user's build does; they run with buildah's chroot isolation and the host's network,
pip trusting the host's CA bundle (mounted for the build only: this machine's egress goes
through a TLS proxy whose CA a plain Debian image does not know).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from tests.k8s.lab import build, config, howfast_image, image, image_store
from tests.k8s.lab.config import Paths
from tests.k8s.lab.proc import LabError, LabUnavailable, locked, log, run

DOCKERFILE = howfast_image.REPO / "deploy" / "Dockerfile.howfast"
BASE_IMAGE = "localhost/debian:bookworm-minbase"
IMAGE_NAME = "localhost/howfast-dockerfile"
BASE_RECIPE = 1
BUILDAH = "/usr/bin/buildah"
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
BUILD_CA_BUNDLE = "/run/host-ca-bundle.pem"
# Removed from the base like from the pgfio image: nothing the Dockerfile's steps need.
_BASE_SLIM = ("var/lib/apt/lists", "var/cache/apt", "usr/share/doc", "usr/share/man")


def _buildah(paths: Paths) -> list[str]:
    store = paths.root / "buildah"
    return [
        BUILDAH,
        "--root", str(store / "root"),
        "--runroot", str(store / "runroot"),
        "--storage-driver", "overlay",
    ]  # fmt: skip


def _base_recipe() -> str:
    parts = (str(BASE_RECIPE), config.DEBIAN_SUITE, config.DEBIAN_MIRROR, "minbase")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def ensure_base(paths: Paths) -> Path:
    """The lab's Debian base as a docker-archive (debootstrap minbase; cached)."""
    out, stamp = paths.images / "debian-base.tar", paths.images / "debian-base.stamp"
    recipe = _base_recipe()
    if out.exists() and stamp.exists() and stamp.read_text().strip() == recipe:
        return out
    t0 = time.monotonic()
    rootfs = paths.images / "debian-base-rootfs"
    if rootfs.exists():
        shutil.rmtree(rootfs)
    log_file = paths.logs / "debootstrap-base.log"
    log(f"debootstrap --variant=minbase {config.DEBIAN_SUITE} (log: {log_file})")
    run(
        ["debootstrap", "--variant=minbase", config.DEBIAN_SUITE, rootfs, config.DEBIAN_MIRROR],
        log_file=log_file,
    )
    run(["chroot", rootfs, "apt-get", "clean"], log_file=log_file)
    for rel in _BASE_SLIM:
        target = rootfs / rel
        if target.is_dir():
            shutil.rmtree(target)
    # apt-get update in the Dockerfile needs the lists directory (debian:bookworm-slim has it)
    (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True)
    image.pack_image(rootfs, BASE_IMAGE, out, cmd=["/bin/bash"])
    shutil.rmtree(rootfs)
    stamp.write_text(recipe + "\n")
    log(f"image {BASE_IMAGE} built in {time.monotonic() - t0:.0f}s ({out.stat().st_size >> 20} MB)")
    return out


def blocker() -> str | None:
    """Why buildah cannot build here, or None."""
    if not Path(BUILDAH).exists():
        return "buildah is not installed (the lab's package list installs it: `build`)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (buildah's storage driver)"
    return None


def _key(wheel: Path, requirements: str) -> str:
    h = hashlib.sha256()
    for part in (_base_recipe(), DOCKERFILE.read_text(), image._sha256_file(wheel), requirements):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def ensure_image(paths: Paths | None = None) -> tuple[str, Path]:
    """(reference, docker-archive) of deploy/Dockerfile.howfast built by buildah for this
    checkout; built when missing, the previous one deleted."""
    paths = paths or Paths.default()
    if not Path(BUILDAH).exists():
        build.install_packages(paths)
    why = blocker()
    if why:
        raise LabUnavailable(why)
    with (
        locked(paths.images / "howfast-dockerfile.lock", "howfast's Dockerfile image"),
        tempfile.TemporaryDirectory(prefix="howfast-dockerfile-") as tmp,
    ):
        context = Path(tmp) / "dist"
        wheel = howfast_image.build_wheel(context)
        requirements = howfast_image.locked_requirements()
        (context / "requirements.txt").write_text(requirements)
        key = _key(wheel, requirements)
        ref = f"{IMAGE_NAME}:{key}"
        out = paths.images / f"howfast-dockerfile-{key}.tar"
        if out.exists():
            return ref, out
        base = ensure_base(paths)
        t0 = time.monotonic()
        buildah = _buildah(paths)
        listed = run([*buildah, "images", "--format", "{{.Name}}:{{.Tag}}"], check=False)
        if BASE_IMAGE not in listed.stdout.split():
            run([*buildah, "pull", f"docker-archive:{base}"], log_file=paths.logs / "buildah.log")
        log(f"buildah build -f deploy/Dockerfile.howfast (log: {paths.logs / 'buildah.log'})")
        argv: list[str | os.PathLike[str]] = [
                *config.build_nice(), *buildah, "build",
                "--isolation", "chroot", "--network", "host", "--pull=never",
                "--build-arg", f"BASE={BASE_IMAGE}",
                # pip trusts what this machine trusts (it may sit behind a TLS proxy); the
                # bundle is mounted for the RUN steps only and is not in the image
                "--volume", f"{HOST_CA_BUNDLE}:{BUILD_CA_BUNDLE}:ro",
                "--build-arg", f"PIP_CERT={BUILD_CA_BUNDLE}",
                "--format", "docker", "--layers=false",
                "-f", DOCKERFILE, "-t", ref, context,
        ]  # fmt: skip
        proc = run(argv, log_file=paths.logs / "buildah.log", check=False)
        if proc.returncode != 0:
            raise LabError(f"buildah build failed (exit {proc.returncode}): see buildah.log")
        partial = out.with_name(out.name + ".partial")
        partial.unlink(missing_ok=True)
        run([*buildah, "push", ref, f"docker-archive:{partial}:{ref}"],
            log_file=paths.logs / "buildah.log")  # fmt: skip
        partial.replace(out)
        # only the tarball is kept: buildah's copy of the image is dropped, the base stays
        run([*buildah, "rmi", ref], check=False, log_file=paths.logs / "buildah.log")
        for old in paths.images.glob("howfast-dockerfile-*.tar"):
            if old != out:
                old.unlink()
        size = out.stat().st_size >> 20
        log(f"image {ref} built by buildah in {time.monotonic() - t0:.0f}s ({size} MB)")
    return ref, out


def import_image(paths: Paths, tarball: Path, ref: str, nodes: int) -> None:
    """Into each node's containerd (older images of this name removed first)."""
    for index in range(1, nodes + 1):
        sock = paths.node(index).containerd_sock
        ctr = ["/usr/bin/ctr", "--address", str(sock), "--namespace", "k8s.io"]
        listed = run([*ctr, "images", "ls", "-q"], check=False).stdout.split()
        old = [name for name in listed if name.startswith(IMAGE_NAME + ":") and name != ref]
        if old:
            run([*ctr, "images", "rm", *old], check=False)
        image_store.remove_orphans(ctr)
        if ref in listed:
            continue
        t0 = time.monotonic()
        proc = run([*ctr, "images", "import", tarball], check=False, timeout=300)
        if proc.returncode != 0:
            raise LabError(f"ctr images import {tarball} (node {index}): {proc.stderr.strip()}")
        log(f"image {ref} imported into node {index} in {time.monotonic() - t0:.1f}s")


# The in-cluster tests use howfast_image.py's image (seconds to build); with this set to
# "dockerfile" they use the one built from deploy/Dockerfile.howfast (minutes, PyPI downloads).
BUILDER_ENV = "HOWFAST_K8S_LAB_HOWFAST_IMAGE"


def selected_builder() -> ModuleType:
    """howfast_image, or this module when $HOWFAST_K8S_LAB_HOWFAST_IMAGE is "dockerfile"; both
    offer ensure_image(paths) and import_image(paths, tarball, ref, nodes)."""
    if os.environ.get(BUILDER_ENV, "").strip() == "dockerfile":
        return sys.modules[__name__]
    return howfast_image
