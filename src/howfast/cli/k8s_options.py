"""The Kubernetes options of `howfast run` and `howfast probe` (k8s:// targets only); their
values reach the service by name (TargetRunOptions.kind_values), which refuses them without a
k8s:// target (service/target_choice.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from howfast.targets.k8s.spec import (
    DEFAULT_FIO_IMAGE,
    DEFAULT_IMAGE,
    DEFAULT_VOLUME_SIZE,
)

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--namespace",
        metavar="NS",
        help="k8s:// targets: the namespace to create the run's objects in [default: the "
        "kubeconfig context's, else default]. howfast creates no namespace.",
    ),
    click.option(
        "--kube-context", metavar="NAME", help="k8s:// targets: the kubeconfig context to use."
    ),
    click.option(
        "--volume-size",
        metavar="SIZE",
        help=f"k8s:// targets: size of each volume (a quantity) [default: {DEFAULT_VOLUME_SIZE}].",
    ),
    click.option(
        "--image",
        metavar="IMAGE",
        help=f"k8s:// targets: the PostgreSQL image (with pgbench, pg_test_fsync) "
        f"[default: {DEFAULT_IMAGE}].",
    ),
    click.option(
        "--fio-image",
        metavar="IMAGE",
        help=f"k8s:// targets: the image fio runs in [default: {DEFAULT_FIO_IMAGE}]; give "
        "--image's when it holds fio (deploy/Dockerfile's does).",
    ),
    click.option("--node", metavar="NODE", help="k8s:// targets: run the pod on this node."),
    click.option(
        "--cpu",
        metavar="CPU",
        help="k8s:// targets: the server container's CPU request and limit (e.g. 2, 500m).",
    ),
)


def kubernetes_options(fn: F) -> F:
    for option in reversed(_OPTIONS):
        fn = option(fn)
    return fn
