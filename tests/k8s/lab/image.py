"""Container images without a registry: a root filesystem packed as a docker-archive tarball.

`ctr images import` reads the tarball; pods then use the image with `imagePullPolicy: Never`.
The archive holds one layer (a plain tar of the root filesystem), an image config naming that
layer's digest, and manifest.json with the image's name.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from tests.k8s.lab import config
from tests.k8s.lab.proc import LabError, log, run

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pack_image(
    rootfs: Path,
    ref: str,
    out: Path,
    *,
    entrypoint: list[str] | None = None,
    cmd: list[str] | None = None,
    user: str | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """Write `out`, a docker-archive tarball of `rootfs` tagged `ref` (atomically)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".pack-") as tmp:
        layer = Path(tmp) / "layer.tar"
        # GNU tar keeps hard links, device nodes, numeric owners and modes exactly.
        run(["tar", "--numeric-owner", "--xattrs", "-C", rootfs, "-cf", layer, "."])
        diff_id = _sha256_file(layer)
        environment = {"PATH": DEFAULT_PATH}
        environment.update(env or {})
        image_config: dict[str, Any] = {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": [f"{k}={v}" for k, v in environment.items()]},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
            "history": [{"created_by": "howfast tests/k8s/lab"}],
        }
        if entrypoint:
            image_config["config"]["Entrypoint"] = entrypoint
        if cmd:
            image_config["config"]["Cmd"] = cmd
        if user:
            image_config["config"]["User"] = user
        config_bytes = json.dumps(image_config, sort_keys=True).encode()
        config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
        layer_name = f"{diff_id}/layer.tar"
        manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": [layer_name]}]
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w") as archive:

            def add_bytes(name: str, data: bytes) -> None:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                archive.addfile(info, io.BytesIO(data))

            add_bytes(config_name, config_bytes)
            archive.add(layer, arcname=layer_name)
            add_bytes("manifest.json", json.dumps(manifest).encode())
        partial.replace(out)


# --- the PostgreSQL + pgbench + fio image ------------------------------------------------------

# Removed from the root filesystem: documentation, the LLVM JIT (100+ MB, jit=off anyway), apt
# lists and the cluster the package creates at install time.
_SLIM_PATHS = (
    "var/lib/apt/lists",
    "var/cache/apt",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "usr/lib/postgresql/15/lib/bitcode",
    "var/lib/postgresql/15",
    "etc/postgresql/15",
)
_SLIM_GLOBS = (
    "usr/lib/x86_64-linux-gnu/libLLVM-*.so*",
    "usr/lib/postgresql/15/lib/llvmjit*",
)


def _id_of(table: Path, name: str) -> int | None:
    """The id of `name` in a passwd or group file inside the rootfs."""
    for line in table.read_text().splitlines():
        fields = line.split(":")
        if fields[0] == name:
            return int(fields[2])
    return None


def _renumber_postgres(rootfs: Path) -> None:
    """Give the image's postgres user and group the fixed id config.PG_UID/PG_GID.

    Debian's package makes a system user with whatever id is free; Kubernetes pods run as a
    number (runAsUser), so a stable, well-known one (999, like the official images) is better.
    """
    passwd, group = rootfs / "etc/passwd", rootfs / "etc/group"
    old_uid = _id_of(passwd, "postgres")
    old_gid = _id_of(group, "postgres")
    if old_uid is None or old_gid is None:
        raise LabError("the image has no postgres user or group after installing postgresql-15")
    if (old_uid, old_gid) == (config.PG_UID, config.PG_GID):
        return
    for table, new, name in ((passwd, config.PG_UID, "passwd"), (group, config.PG_GID, "group")):
        lines = table.read_text().splitlines()
        taken = [ln.split(":")[0] for ln in lines if ln.split(":")[2] == str(new)]
        if taken and taken != ["postgres"]:
            raise LabError(f"id {new} is already used in the image's /etc/{name} by {taken}")
        out = []
        for ln in lines:
            f = ln.split(":")
            if f[0] == "postgres":
                f[2] = str(new)
                if name == "passwd":
                    f[3] = str(config.PG_GID)
            out.append(":".join(f))
        table.write_text("\n".join(out) + "\n")
    for dirpath, dirnames, filenames in os.walk(rootfs):
        for entry in (dirpath, *[os.path.join(dirpath, n) for n in (*dirnames, *filenames)]):
            st = os.lstat(entry)
            uid = config.PG_UID if st.st_uid == old_uid else -1
            gid = config.PG_GID if st.st_gid == old_gid else -1
            if uid != -1 or gid != -1:
                os.lchown(entry, uid, gid)


def build_pg_rootfs(rootfs: Path, log_file: Path) -> None:
    """debootstrap a Debian minbase with PostgreSQL 15, pgbench and fio; slim it down."""
    if rootfs.exists():
        shutil.rmtree(rootfs)
    log(f"debootstrap {config.DEBIAN_SUITE} + {', '.join(config.IMAGE_PACKAGES)} (log: {log_file})")
    run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(config.IMAGE_PACKAGES)}",
            config.DEBIAN_SUITE,
            rootfs,
            config.DEBIAN_MIRROR,
        ],
        log_file=log_file,
    )
    run(["chroot", rootfs, "apt-get", "clean"], log_file=log_file)
    for rel in _SLIM_PATHS:
        target = rootfs / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
    for pattern in _SLIM_GLOBS:
        for target in rootfs.glob(pattern):
            target.unlink()
    _renumber_postgres(rootfs)
    # Where a pod may put its socket and data when run as postgres (the PVC is mounted on /data).
    run_pg = rootfs / "var/run/postgresql"
    run_pg.mkdir(parents=True, exist_ok=True)
    os.chown(run_pg, config.PG_UID, config.PG_GID)
    data = rootfs / "data"
    data.mkdir(exist_ok=True)
    os.chown(data, config.PG_UID, config.PG_GID)


def build_pause_rootfs(rootfs: Path, pause_binary: Path) -> None:
    if rootfs.exists():
        shutil.rmtree(rootfs)
    rootfs.mkdir(parents=True)
    shutil.copy2(pause_binary, rootfs / "pause")
