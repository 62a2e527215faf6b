"""What a killed run on a `cnpg://` target left besides its labelled objects (which
targets/k8s/cleanup.py removes): its database. The run's owner Secret names the target
(`howfast.dev/target`), so the Cluster is found again; the database is dropped only if its
comment says that run (`howfast: run TOKEN`), and its Database resource, if any, deleted
(the operator drops the database: reclaim policy delete). The user's Cluster is only read."""

from __future__ import annotations

from howfast.errors import HowfastError, UsageError
from howfast.targets.base import Connection
from howfast.targets.cnpg import database as d
from howfast.targets.cnpg import dbwork
from howfast.targets.cnpg.api import CnpgApi
from howfast.targets.cnpg.credentials import choose_secret, published
from howfast.targets.cnpg.forwards import InstanceForwards
from howfast.targets.cnpg.spec import SCHEME, parse_target
from howfast.targets.k8s.cluster import Cluster


def drop_left(cluster: Cluster, namespace: str, token: str, target: str | None) -> list[str]:
    """Warnings (one line each) for what could not be dropped; [] when nothing was left or
    the run was not on a cnpg:// target."""
    if not target or not target.startswith(SCHEME):
        return []
    try:
        spec = parse_target(target)
        ns = spec.namespace or namespace
        api = CnpgApi(cluster)
        api.delete_database(ns, d.resource_name(token))
        try:
            obj = api.read_cluster(ns, spec.cluster)
        except UsageError:  # the Cluster is gone, and its databases with it
            return []
        primary = str((obj.get("status") or {}).get("currentPrimary") or "")
        login = published(api.read_secret(ns, choose_secret(obj, spec.credentials).name))
        admin = Connection("127.0.0.1", 0, login.user, d.ADMIN_DATABASE, login.password)
        forwards = InstanceForwards(cluster, ns, admin)
        try:
            dbwork.drop(forwards.connection(primary), d.OwnDatabase(token, login.user), "sql",
                        lambda: None)  # fmt: skip
        finally:
            forwards.close()
    except HowfastError as exc:
        return [f"run {token}'s database on {target} was not dropped: {exc}"]
    return []
