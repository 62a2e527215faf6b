"""`cnpg://[NAMESPACE/]CLUSTER[?credentials=app|superuser&client_node=NODE]`: which
CloudNativePG cluster, in which namespace, with which of its published secrets. Pure:
nothing here talks to a cluster."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from howfast.design import unknown_key
from howfast.errors import UsageError

SCHEME = "cnpg://"
USAGE = "give cnpg://CLUSTER or cnpg://NAMESPACE/CLUSTER (a CloudNativePG Cluster's name)"
# app: the owner of the cluster's application database (bootstrap.initdb.secret, else
# CLUSTER-app); superuser: spec.superuserSecret (else CLUSTER-superuser), only when
# spec.enableSuperuserAccess is true. "auto": the superuser when enabled (it may CREATE
# DATABASE), else the app user (a Database resource makes howfast's database).
Credentials = Literal["auto", "app", "superuser"]
CREDENTIALS: tuple[Credentials, ...] = ("auto", "app", "superuser")
QUERY_KEYS = ("credentials", "client_node", "volume")
# `howfast probe cnpg://CLUSTER?volume=wal`: a new volume of the WAL class, not the data one
VOLUMES = ("data", "wal")
# DNS-1123 label (namespaces) and subdomain (Clusters are named like their pods' prefix)
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@dataclass(frozen=True)
class CnpgSpec:
    text: str
    cluster: str
    namespace: str | None  # None: the --namespace option's, else the kubeconfig context's
    credentials: Credentials = "auto"
    client_node: str | None = None
    volume: str | None = None  # probe only: "data" (the default) or "wal"

    def in_namespace(self, default: str) -> str:
        return self.namespace or default


def parse_target(text: str) -> CnpgSpec:
    """cnpg://CLUSTER, cnpg://NAMESPACE/CLUSTER, with ?credentials= and ?client_node=."""
    if not text.startswith(SCHEME):
        raise UsageError(f"{text!r} is not a cnpg:// target", USAGE)
    parts = urlsplit(text)
    path = (parts.netloc + parts.path).strip("/")
    if not path:
        raise UsageError(f"{text}: no Cluster named", USAGE)
    names = path.split("/")
    if len(names) > 2:
        raise UsageError(f"{text}: {path!r} has more than NAMESPACE/CLUSTER", USAGE)
    namespace = names[0] if len(names) == 2 else None
    cluster = names[-1]
    if namespace is not None and not _LABEL.match(namespace):
        raise UsageError(f"{text}: {namespace!r} is not a namespace name", USAGE)
    if not _SUBDOMAIN.match(cluster):
        raise UsageError(f"{text}: {cluster!r} is not a Cluster name", USAGE)
    try:
        query = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=True))
    except ValueError:
        raise UsageError(f"{text}: cannot read the query {parts.query!r}", USAGE) from None
    unknown = sorted(set(query) - set(QUERY_KEYS))
    if unknown:
        raise UsageError(f"{text}: {unknown_key(unknown[0], QUERY_KEYS)}", USAGE)
    credentials = _credentials(query.get("credentials", "auto"), text)
    client_node = query.get("client_node")
    if client_node is not None and not _SUBDOMAIN.match(client_node):
        raise UsageError(f"{text}: client_node={client_node!r} is not a node name")
    volume = query.get("volume")
    if volume is not None and volume not in VOLUMES:
        raise UsageError(f"{text}: volume={volume!r} is not one of {', '.join(VOLUMES)}")
    return CnpgSpec(text, cluster, namespace, credentials, client_node, volume)


def _credentials(value: str, text: str) -> Credentials:
    for choice in CREDENTIALS:
        if value == choice:
            return choice
    raise UsageError(f"{text}: credentials={value!r} is not one of {', '.join(CREDENTIALS)}")
