"""The image of howfast itself (`howfast run --in-cluster` runs it as a Job), built from the lab's
PostgreSQL image and the project's wheel: no registry, no Dockerfile, no second debootstrap.

The lab's pgfio image (image.py: Debian bookworm, postgresql-15 with psql and pgbench, fio,
procps) already holds Debian's python3.11 (fio's helper scripts depend on it), so howfast's
image is that image's layer, byte for byte (containerd stores it once), plus one layer:

    /opt/howfast/lib        the wheel (`uv build`) and its locked dependencies (uv.lock),
                            installed with `uv pip install --target` for this machine's
                            python3, which is bookworm's 3.11 as in the image
    /usr/local/bin/howfast  a launcher: the image's python3 with /opt/howfast/lib first

It runs as the image's postgres user (uid/gid 999), non-root. The tarball is cached in the lab's
images directory, keyed by the pgfio image's recipe, the wheel's and uv.lock's digests: a
rebuild happens when the sources change (the wheel differs), and the previous one is deleted.
deploy/Dockerfile.howfast is the same recipe for real clusters.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path
from subprocess import CompletedProcess

from tests.k8s.lab import config, image, image_store
from tests.k8s.lab.config import Paths
from tests.k8s.lab.proc import LabError, locked, log, run

REPO = Path(__file__).resolve().parents[3]
RECIPE = 2  # bump when the recipe changes in a way the key cannot see
PYTHON = "/usr/bin/python3"  # bookworm's python3.11, here as in the image
SITE = "opt/howfast/lib"
IMAGE_NAME = "localhost/howfast"
LAUNCHER = f"""#!{PYTHON}
# howfast in this image: bookworm's python3 with the wheel's site directory first
import sys

sys.path.insert(0, "/{SITE}")
from howfast.__main__ import run

run()
"""


def uv_binary() -> str:
    found = shutil.which("uv") or str(REPO / ".tools/bin/uv")
    if not Path(found).exists():
        raise LabError("uv is needed to build howfast's image (make setup installs it)")
    return found


def _sha256(path: Path) -> str:
    return image._sha256_file(path)


def build_wheel(out_dir: Path) -> Path:
    """`uv build --wheel` of this checkout into `out_dir`."""
    run([uv_binary(), "build", "--wheel", "--quiet", "--out-dir", out_dir, REPO], cwd=REPO)
    wheels = sorted(out_dir.glob("howfast-*.whl"))
    if len(wheels) != 1:
        raise LabError(f"uv build left {len(wheels)} wheels in {out_dir}")
    return wheels[0]


def locked_requirements() -> str:
    proc = run(
        [uv_binary(), "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project",
         "--format", "requirements-txt"],
        cwd=REPO,
    )  # fmt: skip
    return proc.stdout


def _image_key(paths: Paths, wheel: Path, requirements: str) -> str:
    base = (paths.images / "pgfio.stamp").read_text().strip()
    h = hashlib.sha256()
    for part in (str(RECIPE), base, _sha256(wheel), requirements, PYTHON):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def _pgfio_layer(paths: Paths) -> tuple[str, str]:
    """(member name, diff id) of the pgfio image's only layer."""
    with tarfile.open(paths.images / "pgfio.tar") as archive:
        manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
        layer = manifest[0]["Layers"][0]
        conf = json.load(archive.extractfile(manifest[0]["Config"]))  # type: ignore[arg-type]
    return layer, conf["rootfs"]["diff_ids"][0]


def _install(stage: Path, wheel: Path, requirements: str) -> None:
    site = stage / SITE
    site.mkdir(parents=True)
    req = stage.parent / "requirements.txt"
    req.write_text(requirements)
    run(
        [uv_binary(), "pip", "install", "--quiet", "--target", site, "--python", PYTHON,
         "--link-mode", "copy", "-r", req, wheel],
        cwd=REPO,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )  # fmt: skip
    # --target writes entry-point scripts for this machine's paths: the launcher replaces them.
    # The dependencies' own test suites (70 MB of scipy's and numpy's) are never run here.
    shutil.rmtree(site / "bin", ignore_errors=True)
    for tests in [p for p in site.glob("*/**/tests") if p.is_dir()]:
        shutil.rmtree(tests, ignore_errors=True)
    launcher = stage / "usr/local/bin/howfast"
    launcher.parent.mkdir(parents=True)
    launcher.write_text(LAUNCHER)
    launcher.chmod(0o755)


def _pack(paths: Paths, stage: Path, ref: str, out: Path) -> None:
    """A docker-archive of two layers: pgfio's (the same bytes) and the staged tree."""
    base_member, base_diff = _pgfio_layer(paths)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".pack-") as tmp:
        layer = Path(tmp) / "layer.tar"
        run(["tar", "--numeric-owner", "--owner=0", "--group=0", "-C", stage, "-cf", layer, "."])
        diff = image._sha256_file(layer)
        conf = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Env": [f"PATH={config.PG_BINDIR}:{image.DEFAULT_PATH}"],
                "Cmd": ["howfast", "--help"],
                "User": f"{config.PG_UID}:{config.PG_GID}",
            },
            "rootfs": {"type": "layers", "diff_ids": [base_diff, f"sha256:{diff}"]},
            "history": [{"created_by": "howfast tests/k8s/lab (pgfio)"},
                        {"created_by": "howfast tests/k8s/lab (howfast wheel)"}],
        }  # fmt: skip
        conf_bytes = json.dumps(conf, sort_keys=True).encode()
        conf_name = hashlib.sha256(conf_bytes).hexdigest() + ".json"
        (Path(tmp) / conf_name).write_bytes(conf_bytes)
        member = f"{diff}/layer.tar"
        manifest = [{"Config": conf_name, "RepoTags": [ref], "Layers": [base_member, member]}]
        (Path(tmp) / "manifest.json").write_text(json.dumps(manifest))
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(paths.images / "pgfio.tar") as base, tarfile.open(partial, "w") as tar:
            info = base.getmember(base_member)
            tar.addfile(info, base.extractfile(info))
            tar.add(layer, arcname=member)
            tar.add(Path(tmp) / conf_name, arcname=conf_name)
            tar.add(Path(tmp) / "manifest.json", arcname="manifest.json")
        partial.replace(out)


def ensure_image(paths: Paths | None = None) -> tuple[str, Path]:
    """(image reference, docker-archive tarball) of howfast as checked out; built when
    missing (the lab's pgfio image must be built: build.ensure_built)."""
    paths = paths or Paths.default()
    if not (paths.images / "pgfio.tar").exists():
        raise LabError("the lab's pgfio image is not built (python -m tests.k8s.lab build)")
    # one build at a time (checkouts share the images directory and its `.partial` file)
    with (
        locked(paths.images / "howfast-image.lock", "howfast's image"),
        tempfile.TemporaryDirectory(prefix="howfast-image-") as tmp,
    ):
        t0 = time.monotonic()
        wheel = build_wheel(Path(tmp) / "dist")
        requirements = locked_requirements()
        key = _image_key(paths, wheel, requirements)
        ref = f"{IMAGE_NAME}:{key}"
        out = paths.images / f"howfast-{key}.tar"
        if out.exists():
            return ref, out
        log(f"building image {ref} (pgfio + {wheel.name} and its dependencies)")
        stage = Path(tmp) / "stage"
        _install(stage, wheel, requirements)
        _pack(paths, stage, ref, out)
        for old in paths.images.glob("howfast-*.tar"):
            if old != out:
                old.unlink()
        size = sum(f.stat().st_size for f in stage.rglob("*") if f.is_file()) >> 20
        log(f"image {ref} built in {time.monotonic() - t0:.0f}s (its own layer: {size} MB)")
    return ref, out


def _ctr(paths: Paths, node: int, *args: str | Path, timeout: float = 60) -> CompletedProcess[str]:
    sock = paths.node(node).containerd_sock
    return run(["/usr/bin/ctr", "--address", sock, "--namespace", "k8s.io", *args],
               check=False, timeout=timeout)  # fmt: skip


def import_image(paths: Paths, tarball: Path, ref: str, nodes: int) -> None:
    """Into every node's containerd of the running lab (`ctr images import`; the pgfio layer
    is there already), unless it is there; older images of howfast are removed from it first
    (containerd's store outlives the lab's `down`: each would keep ~0.4 GB)."""
    for index in range(1, nodes + 1):
        listed = _ctr(paths, index, "images", "ls", "-q").stdout.split()
        old = [name for name in listed if name.startswith(IMAGE_NAME + ":") and name != ref]
        if old:
            _ctr(paths, index, "images", "rm", *old)
        sock = str(paths.node(index).containerd_sock)
        image_store.remove_orphans(["/usr/bin/ctr", "--address", sock, "--namespace", "k8s.io"])
        if ref in listed:
            continue
        t0 = time.monotonic()
        proc = _ctr(paths, index, "images", "import", tarball, timeout=300)
        if proc.returncode != 0:
            raise LabError(f"ctr images import {tarball} (node {index}) failed: {proc.stderr}")
        log(f"image {ref} imported into node {index} in {time.monotonic() - t0:.1f}s")
