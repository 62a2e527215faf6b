"""The CloudNativePG operator in the lab: built from its Go module, packed like the lab's other
images, installed from the release manifest its module ships, on demand (`cnpg install`).

    k8s-1.34.4/cnpg-1.27.1/
        manager          `go build ./cmd/manager` of github.com/cloudnative-pg/cloudnative-pg
        release.yaml     the module's releases/cnpg-1.27.1.yaml (CRDs, RBAC, webhooks,
                         Deployment: `kustomize build config/default` as released)
        operator.tar     localhost/cnpg-operator:1.27.1: the pgfio image's layer (the lab's
                         Debian base, stored once by containerd) + /manager
        operator.stamp   what operator.tar was made from

The operator makes its own webhook certificates (a CA and a serving certificate in the
cnpg-system secrets cnpg-ca-secret and cnpg-webhook-cert) and patches the caBundle of its
webhook configurations itself: no cert-manager. PostgreSQL instances run the lab's pgfio image
(tag 15: the operator reads the major version from it) as its postgres user, uid/gid 999.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from tests.k8s.lab import build, config, howfast_image, image, image_store
from tests.k8s.lab.config import Paths
from tests.k8s.lab.proc import LabError, LabUnavailable, locked, log, run, wait_until

RECIPE = 2  # bump when the image or the manifest adaptation changes in a way the stamp misses
OPERATOR_UID = 10001  # the release's Deployment runs the manager as 10001:10001
DEPLOYMENT = "cnpg-controller-manager"
WEBHOOK_CONFIGS = (
    ("mutatingwebhookconfiguration", "cnpg-mutating-webhook-configuration"),
    ("validatingwebhookconfiguration", "cnpg-validating-webhook-configuration"),
)
CLUSTER_NAMESPACE = "lab"
CLUSTER_NAME = "pg"
HEALTHY = "Cluster in healthy state"
# one synchronous standby of any, commits wait for it (no degraded mode without one)
SYNCHRONOUS = {"method": "any", "number": 1, "dataDurability": "required"}


def cnpg_dir(paths: Paths) -> Path:
    return paths.root / f"cnpg-{config.CNPG_VERSION}"


def manager_binary(paths: Paths) -> Path:
    return cnpg_dir(paths) / "manager"


def release_manifest(paths: Paths) -> Path:
    return cnpg_dir(paths) / "release.yaml"


def operator_tarball(paths: Paths) -> Path:
    return cnpg_dir(paths) / "operator.tar"


# --- build -----------------------------------------------------------------------------------


def build_manager(paths: Paths) -> None:
    """`go build ./cmd/manager` in the module (as its Makefile does), with the lab's Go and
    caches; keeps the release manifest beside it (the module cache may be pruned)."""
    out, manifest = manager_binary(paths), release_manifest(paths)
    if out.exists() and manifest.exists():
        return
    go = build.go_binary()
    version = build.go_version(go) if go else None
    if go is None or version is None or version < build.GO_MIN:
        raise LabUnavailable(f"Go >= 1.24 is needed to build the CloudNativePG operator: {go}")
    env = build.go_env(paths)
    module = f"{config.CNPG_MODULE}@v{config.CNPG_VERSION}"
    out.parent.mkdir(parents=True, exist_ok=True)
    log(f"go mod download {module}")
    listed = run(["go", "mod", "download", "-json", module], env=env, cwd=paths.root)
    info = json.loads(listed.stdout)
    source = Path(info["Dir"])
    run(["go", "mod", "download"], env=env, cwd=source, log_file=paths.logs / "build-cnpg.log")
    commit = str(info.get("Origin", {}).get("Hash", "unknown"))[:7]
    stamp = json.loads(Path(info["Info"]).read_text()).get("Time", "")[:10]
    pkg = f"{config.CNPG_MODULE}/pkg/versions"
    ldflags = (
        f"-s -w -X {pkg}.buildVersion={config.CNPG_VERSION} -X {pkg}.buildCommit={commit}"
        f" -X {pkg}.buildDate={stamp}"
    )
    partial = out.with_name(".manager.partial")
    log(f"go build {config.CNPG_MODULE}/cmd/manager (log: build-cnpg.log)")
    t0 = time.monotonic()
    run(
        [
            *config.build_nice(),
            "go",
            "build",
            f"-ldflags={ldflags}",
            "-o",
            partial,
            "./cmd/manager",
        ],
        env=env,
        cwd=source,
        log_file=paths.logs / "build-cnpg.log",
    )
    shutil.copyfile(source / "releases" / f"cnpg-{config.CNPG_VERSION}.yaml", manifest)
    partial.replace(out)
    log(f"CloudNativePG manager built in {time.monotonic() - t0:.0f}s")


def _image_recipe(paths: Paths) -> str:
    h = hashlib.sha256()
    for part in (
        str(RECIPE),
        (paths.images / "pgfio.stamp").read_text().strip(),
        image._sha256_file(manager_binary(paths)),
    ):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def ensure_operator_image(paths: Paths) -> Path:
    """The operator's image as a docker-archive: pgfio's layer (byte for byte) and /manager."""
    out = operator_tarball(paths)
    stamp = out.with_name("operator.stamp")
    recipe = _image_recipe(paths)
    if out.exists() and stamp.exists() and stamp.read_text().strip() == recipe:
        return out
    t0 = time.monotonic()
    base_member, base_diff = howfast_image._pgfio_layer(paths)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".pack-") as tmp:
        stage = Path(tmp) / "stage"
        stage.mkdir()
        # As the upstream image: the operator finds the architectures it can run instance
        # managers on from operator/manager_<GOARCH> (relative to /), and runs /manager.
        (stage / "operator").mkdir()
        shutil.copyfile(manager_binary(paths), stage / "operator" / "manager_amd64")
        (stage / "operator" / "manager_amd64").chmod(0o755)
        (stage / "manager").symlink_to("operator/manager_amd64")
        layer = Path(tmp) / "layer.tar"
        run(["tar", "--numeric-owner", "--owner=0", "--group=0", "-C", stage, "-cf", layer, "."])
        diff = image._sha256_file(layer)
        conf = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Env": [f"PATH={image.DEFAULT_PATH}"],
                "WorkingDir": "/",
                "Entrypoint": ["/manager"],
                "User": f"{OPERATOR_UID}:{OPERATOR_UID}",
            },
            "rootfs": {"type": "layers", "diff_ids": [base_diff, f"sha256:{diff}"]},
            "history": [
                {"created_by": "howfast tests/k8s/lab (pgfio)"},
                {"created_by": f"howfast tests/k8s/lab (cloudnative-pg {config.CNPG_VERSION})"},
            ],
        }
        conf_bytes = json.dumps(conf, sort_keys=True).encode()
        conf_name = hashlib.sha256(conf_bytes).hexdigest() + ".json"
        member = f"{diff}/layer.tar"
        manifest = [
            {"Config": conf_name, "RepoTags": [config.CNPG_IMAGE], "Layers": [base_member, member]}
        ]
        (Path(tmp) / conf_name).write_bytes(conf_bytes)
        (Path(tmp) / "manifest.json").write_text(json.dumps(manifest))
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(paths.images / "pgfio.tar") as base, tarfile.open(partial, "w") as tar:
            info = base.getmember(base_member)
            tar.addfile(info, base.extractfile(info))
            tar.add(layer, arcname=member)
            tar.add(Path(tmp) / conf_name, arcname=conf_name)
            tar.add(Path(tmp) / "manifest.json", arcname="manifest.json")
        partial.replace(out)
    stamp.write_text(recipe + "\n")
    log(f"image {config.CNPG_IMAGE} packed in {time.monotonic() - t0:.1f}s")
    return out


def ensure_built(paths: Paths) -> Path:
    """The manager, the release manifest and the operator's image (on the lab's pgfio image:
    the lab is built first if it is not). A lock of their own: the lab's build is not held up."""
    if not (paths.images / "pgfio.tar").exists():
        build.ensure_built(paths)
    cnpg_dir(paths).mkdir(parents=True, exist_ok=True)
    with locked(cnpg_dir(paths) / "build.lock", "the CloudNativePG build"):
        build_manager(paths)
        return ensure_operator_image(paths)


# --- manifests (pure) ------------------------------------------------------------------------


def operator_objects(release_text: str, image_ref: str = config.CNPG_IMAGE) -> list[dict[str, Any]]:
    """The release manifest's objects, adapted to the lab: the operator's image is the lab's
    (never pulled), both where the Deployment runs it and where the operator reads which image
    to copy its instance manager from (OPERATOR_IMAGE_NAME); no CPU limit (a 100m quota on this
    shared 2-core machine made the manager miss its 30 s start-up probe)."""
    objects = [doc for doc in yaml.safe_load_all(release_text) if doc]
    for obj in objects:
        if obj.get("kind") != "Deployment":
            continue
        for container in obj["spec"]["template"]["spec"]["containers"]:
            container["image"] = image_ref
            container["imagePullPolicy"] = "Never"
            for env in container.get("env", []):
                if env["name"] == "OPERATOR_IMAGE_NAME":
                    env["value"] = image_ref
            container.get("resources", {}).get("limits", {}).pop("cpu", None)
    return objects


def cluster_object(
    storage_class: str,
    name: str = CLUSTER_NAME,
    namespace: str = CLUSTER_NAMESPACE,
    instances: int = 2,
    size: str = "1Gi",
    synchronous: bool = False,
    wal_storage_class: str | None = None,
) -> dict[str, Any]:
    """A CloudNativePG Cluster on the lab's PostgreSQL image (tag 15 = the major version the
    operator reads; its instance manager runs as the image's postgres user, 999).
    `synchronous`: one synchronous standby, commits wait for it (dataDurability required);
    `wal_storage_class`: pg_wal on a volume of its own (walStorage), of that class."""
    postgresql: dict[str, Any] = {
        # small: two instances share a 2-core machine with the rest of the lab
        "parameters": {"shared_buffers": "32MB", "max_connections": "50"}
    }
    if synchronous:
        postgresql["synchronous"] = SYNCHRONOUS
    spec: dict[str, Any] = {
        "instances": instances,
        "imageName": config.PG_IMAGE,
        "imagePullPolicy": "Never",
        "postgresUID": config.PG_UID,
        "postgresGID": config.PG_GID,
        "storage": {"storageClass": storage_class, "size": size},
        "postgresql": postgresql,
    }
    if wal_storage_class is not None:
        spec["walStorage"] = {"storageClass": wal_storage_class, "size": size}
    return {
        "apiVersion": "postgresql.cnpg.io/v1",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def lab_cluster_object(storage_class: str) -> dict[str, Any]:
    """The lab's Cluster lab/pg, as `cnpg create` makes it and the tests share it: 2
    instances, a synchronous standby, and WAL on a volume of its own, of the lab's class on a
    block device of its own (`lab-wal`): per-device counters read its WAL apart from its data."""
    return cluster_object(storage_class, synchronous=True, wal_storage_class=config.SC_WAL)


# --- install ---------------------------------------------------------------------------------


def _kubectl(
    paths: Paths, *args: str, input: str | None = None, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return run(
        [paths.kubectl, "--kubeconfig", paths.admin_kubeconfig, *args],
        input=input,
        timeout=timeout,
        check=check,
    )


def _running_nodes(paths: Paths) -> list[int]:
    """Indexes of the lab's nodes whose containerd socket exists."""
    return [i for i in (1, 2) if paths.node(i).containerd_sock.exists()]


IMPORTED_MARKERS = "imported.json"  # cluster.py's: image ref -> what was imported


def _read_markers(path: Path) -> dict[str, str]:
    try:
        done = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in done.items()} if isinstance(done, dict) else {}


def import_operator_image(paths: Paths, tarball: Path) -> bool:
    """Into each running node's containerd, unless there already; True if it was imported."""
    imported = False
    wanted = operator_tarball(paths).with_name("operator.stamp").read_text().strip()
    for index in _running_nodes(paths):
        sock = paths.node(index).containerd_sock
        ctr = ["/usr/bin/ctr", "--address", str(sock), "--namespace", "k8s.io"]
        listed = run([*ctr, "images", "ls", "-q"], check=False).stdout.split()
        # in the node's imported.json, beside the lab's other images: `down` keeps that file
        # with the image store, so the next `up` does not import the operator again (~6 s)
        markers = paths.node(index).containerd_dir / IMPORTED_MARKERS
        done = _read_markers(markers)
        if config.CNPG_IMAGE in listed and done.get(config.CNPG_IMAGE) == wanted:
            continue
        t0 = time.monotonic()
        proc = run([*ctr, "images", "import", str(tarball)], check=False, timeout=300)
        if proc.returncode != 0:
            raise LabError(f"ctr images import {tarball} (node {index}): {proc.stderr.strip()}")
        done = _read_markers(markers)  # as it is now: `up` writes it too
        done[config.CNPG_IMAGE] = wanted
        markers.write_text(json.dumps(done))
        image_store.remove_orphans(ctr)  # a rebuilt operator's: the old image's ID
        imported = True
        log(f"image {config.CNPG_IMAGE} imported into node {index} in {time.monotonic() - t0:.1f}s")
    return imported


def _ca_bundles_set(paths: Paths) -> bool:
    for kind, name in WEBHOOK_CONFIGS:
        got = json.loads(_kubectl(paths, "get", kind, name, "-o", "json").stdout)
        if not all(w.get("clientConfig", {}).get("caBundle") for w in got["webhooks"]):
            return False
    return True


def _webhook_answers(paths: Paths, storage_class: str) -> bool:
    """A server-side dry run of a Cluster passes through both webhooks (defaulting, then
    validation): it fails while they do not answer."""
    probe = cluster_object(storage_class, name="webhook-probe", namespace=config.CNPG_NAMESPACE)
    proc = _kubectl(
        paths, "create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False
    )
    return proc.returncode == 0


def install(paths: Paths, storage_class: str = config.SC_DISK, timeout: float = 300) -> float:
    """Import the image, apply the adapted release manifest (server-side: the CRDs are too big
    for the last-applied annotation), wait until the Deployment is available and the webhooks
    answer. Idempotent. Returns the seconds it took."""
    t0 = time.monotonic()
    tarball = ensure_built(paths)
    changed = import_operator_image(paths, tarball)
    if changed and is_installed(paths):
        # same tag, new content: the running manager must be restarted to run it
        _kubectl(
            paths, "-n", config.CNPG_NAMESPACE, "rollout", "restart", f"deployment/{DEPLOYMENT}"
        )
    objects = operator_objects(release_manifest(paths).read_text())
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    _kubectl(
        paths, "apply", "--server-side", "--force-conflicts", "-f", "-", input=doc, timeout=180
    )
    log("CloudNativePG manifests applied; waiting for the operator")
    _kubectl(
        paths,
        "-n", config.CNPG_NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}",
        f"--timeout={int(timeout)}s",
        timeout=timeout + 10,
    )  # fmt: skip
    wait_until("the operator's webhook certificates", lambda: _ca_bundles_set(paths), 120, 1)
    wait_until(
        "the operator's webhooks to answer", lambda: _webhook_answers(paths, storage_class), 120, 2
    )
    took = time.monotonic() - t0
    log(f"CloudNativePG {config.CNPG_VERSION} ready in {took:.1f}s")
    return took


def cluster_status(paths: Paths, name: str, namespace: str) -> dict[str, Any]:
    proc = _kubectl(paths, "-n", namespace, "get", "cluster", name, "-o", "json", check=False)
    if proc.returncode != 0:
        return {}
    return json.loads(proc.stdout).get("status", {})  # type: ignore[no-any-return]


def is_healthy(status: dict[str, Any], instances: int) -> bool:
    return status.get("phase") == HEALTHY and status.get("readyInstances") == instances


def create_cluster(
    paths: Paths,
    storage_class: str = config.SC_DISK,
    name: str = CLUSTER_NAME,
    namespace: str = CLUSTER_NAMESPACE,
    instances: int = 2,
    timeout: float = 600,
) -> float:
    """Create the namespace and the Cluster (unless they exist); wait until it is healthy with
    every instance ready. Returns the seconds it took."""
    t0 = time.monotonic()
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    _kubectl(paths, "apply", "-f", "-", input=json.dumps(ns))
    if (name, namespace, instances) == (CLUSTER_NAME, CLUSTER_NAMESPACE, 2):
        obj = lab_cluster_object(storage_class)  # the one the tests share
    else:
        obj = cluster_object(storage_class, name=name, namespace=namespace, instances=instances)
    _kubectl(paths, "apply", "--server-side", "-f", "-", input=json.dumps(obj))
    log(f"Cluster {namespace}/{name} ({instances} instances on {storage_class}) created")
    wait_until(
        f"Cluster {namespace}/{name} to be healthy",
        lambda: is_healthy(cluster_status(paths, name, namespace), instances),
        timeout,
        2,
    )
    took = time.monotonic() - t0
    log(f"Cluster {namespace}/{name} healthy in {took:.1f}s")
    return took


def delete_cluster(
    paths: Paths, name: str = CLUSTER_NAME, namespace: str = CLUSTER_NAMESPACE
) -> None:
    _kubectl(
        paths, "-n", namespace, "delete", "cluster", name, "--ignore-not-found", "--wait=true",
        timeout=300,
    )  # fmt: skip


def uninstall(paths: Paths) -> None:
    """Delete every object of the release manifest (the CRDs last: deleting them deletes every
    Cluster left, whose pods and claims the garbage collector then removes)."""
    if not release_manifest(paths).exists():
        return
    objects = operator_objects(release_manifest(paths).read_text())
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    rest = [o for o in objects if o["kind"] != "CustomResourceDefinition"]
    for group in (rest, crds):
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": group})
        _kubectl(
            paths, "delete", "--ignore-not-found", "--wait=true", "-f", "-",
            input=doc, timeout=300, check=False,
        )  # fmt: skip


def is_installed(paths: Paths) -> bool:
    proc = _kubectl(
        paths, "-n", config.CNPG_NAMESPACE, "get", "deployment", DEPLOYMENT, "-o", "json",
        check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        return False
    status = json.loads(proc.stdout).get("status", {})
    return bool(status.get("availableReplicas"))
