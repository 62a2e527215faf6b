"""python -m tests.k8s.lab build|up|down|status|howfast-image: the lab by hand."""

from __future__ import annotations

import argparse
import json
import sys

from tests.k8s.lab import build, cluster, config, howfast_image
from tests.k8s.lab.config import Paths
from tests.k8s.lab.proc import LabError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.k8s.lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build or find binaries, images and PKI in the cache")
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
    sub.add_parser(
        "howfast-image",
        help="build howfast's image of this checkout (run --in-cluster); with the lab up, "
        "import it into each node; prints its reference",
    )
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
            print(paths.root)
        elif args.command == "up":
            print(json.dumps(cluster.up(paths, nodes=args.nodes).as_dict(), indent=2))
        elif args.command == "howfast-image":
            ref, tarball = howfast_image.ensure_image(paths)
            status = cluster.status(paths)
            if status["running"] and status["api_ready"]:
                howfast_image.import_image(paths, tarball, ref, len(status["nodes"]))
            print(ref)
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


if __name__ == "__main__":
    sys.exit(main())
