"""python -m tests.k8s.lab build|up|down|status|howfast-image|cnpg: the lab by hand."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tests.k8s.lab import (
    build,
    cluster,
    cnpg,
    cnpg_record,
    config,
    dockerfile_image,
    howfast_image,
)
from tests.k8s.lab.config import Paths
from tests.k8s.lab.proc import LabError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.k8s.lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "build",
        help="build or find binaries, images and PKI in the cache, and the CloudNativePG operator",
    )
    up = sub.add_parser(
        "up", help="build if needed, then start the cluster; prints its facts as JSON"
    )
    up.add_argument(
        "--nodes",
        type=int,
        choices=(1, 2),
        default=None,
        help=f"how many nodes (default: ${config.NODES_ENV}, else {config.DEFAULT_NODES})",
    )
    up.add_argument(
        "--cnpg",
        action="store_true",
        help="then install the CloudNativePG operator and make the 2-instance Cluster lab/pg",
    )
    image_cmd = sub.add_parser(
        "howfast-image",
        help="build howfast's image of this checkout (run --in-cluster); with the lab up, "
        "import it into each node; prints its reference",
    )
    image_cmd.add_argument(
        "--dockerfile",
        action="store_true",
        help="build deploy/Dockerfile.howfast with buildah instead (on the lab's Debian base)",
    )
    cnpg_cmd = sub.add_parser(
        "cnpg",
        help=f"the CloudNativePG operator {config.CNPG_VERSION}: build it; install it and make"
        " the Cluster lab/pg on the running lab; delete them",
    )
    cnpg_cmd.add_argument(
        "action",
        choices=("build", "install", "cluster", "record", "delete-cluster", "uninstall"),
        help="build: the manager and its image; install: the operator (CRDs, RBAC, webhooks,"
        " Deployment) and wait until its webhooks answer; cluster: install, then the"
        " 2-instance Cluster lab/pg, wait until healthy; record DIR: lab/pg's objects"
        " (secrets masked) healthy, then through a failover (its primary pod deleted);"
        " delete-cluster; uninstall: every object of the operator's manifest (its CRDs"
        " delete any Cluster left)",
    )
    cnpg_cmd.add_argument("dir", nargs="?", help="where `record` writes (made if missing)")
    sub.add_parser("down", help="stop the cluster and restore what it changed on the host")
    sub.add_parser("status", help="print what runs and where the cache is, as JSON")
    sub.add_parser(
        "prune",
        help="delete what only a rebuild needs: the Go module and build caches (~4.6 GB)"
        " and, when the lab is down, containerd's kept image store (~0.6 GB)",
    )
    args = parser.parse_args(argv)
    paths = Paths.default()
    try:
        if args.command == "build":
            build.ensure_built(paths)
            # the operator too: `make test` builds here, alone, before its sessions start
            cnpg.ensure_built(paths)
            print(paths.root)
        elif args.command == "up":
            facts = cluster.up(paths, nodes=args.nodes).as_dict()
            if args.cnpg:
                facts["cnpg_install_s"] = round(cnpg.install(paths), 1)
                facts["cnpg_cluster_s"] = round(cnpg.create_cluster(paths), 1)
            print(json.dumps(facts, indent=2))
        elif args.command == "howfast-image":
            builder = dockerfile_image if args.dockerfile else howfast_image
            ref, tarball = builder.ensure_image(paths)
            status = cluster.status(paths)
            if status["running"] and status["api_ready"]:
                builder.import_image(paths, tarball, ref, len(status["nodes"]))
            print(ref)
        elif args.command == "cnpg":
            _cnpg(paths, args.action, args.dir)
        elif args.command == "down":
            cluster.down(paths)
        elif args.command == "prune":
            cluster.prune(paths)
        else:
            print(json.dumps(cluster.status(paths), indent=2))
    except LabError as exc:
        print(f"k8s-lab: {exc}", file=sys.stderr)
        return 1
    return 0


def _cnpg(paths: Paths, action: str, out: str | None) -> None:
    if action == "build":
        print(cnpg.ensure_built(paths))
        return
    status = cluster.status(paths)
    if not (status["running"] and status["api_ready"]):
        raise LabError("the lab is not running: `python -m tests.k8s.lab up` first")
    if action == "install":
        cnpg.install(paths)
    elif action == "cluster":
        cnpg.install(paths)
        cnpg.create_cluster(paths)
    elif action == "record":
        if not out:
            raise LabError("cnpg record needs a directory")
        print(json.dumps(cnpg_record.record_failover(paths, Path(out)), indent=2))
    elif action == "delete-cluster":
        cnpg.delete_cluster(paths)
    else:
        cnpg.uninstall(paths)


if __name__ == "__main__":
    sys.exit(main())
