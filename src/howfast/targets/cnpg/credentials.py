"""Which of the secrets a CloudNativePG cluster publishes howfast uses, and what it holds.
The secret is the one the Cluster's spec names (not guessed from a name): the application
user's (`spec.bootstrap.{initdb,recovery,pg_basebackup}.secret`, else `CLUSTER-app`, as the
operator's GetApplicationSecretName) or the superuser's (`spec.superuserSecret`, else
`CLUSTER-superuser`, only with `spec.enableSuperuserAccess: true`). Pure.

The password is read by the API into memory and goes nowhere else: not printed, stored,
logged, on a command line or in a pod's environment (the client pod takes it from the same
secret by reference: client.py)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from howfast.errors import UsageError
from howfast.targets.cnpg.spec import Credentials

Role = Literal["app", "superuser"]
USERNAME_KEYS = ("username", "user")  # kubernetes.io/basic-auth's key, then the operator's
PASSWORD_KEY = "password"
BOOTSTRAP_METHODS = ("recovery", "pg_basebackup", "initdb")  # the operator's order


@dataclass(frozen=True)
class SecretChoice:
    name: str
    role: Role
    why: str  # for people: "spec.bootstrap.initdb.secret", "CLUSTER-app (the default)"


@dataclass(frozen=True)
class Published:
    """A user and password from a secret; the password never in a repr."""

    user: str
    password: str = field(repr=False)
    dbname: str | None = None


def app_secret(cluster: Mapping[str, Any]) -> SecretChoice:
    name = str((cluster.get("metadata") or {}).get("name"))
    bootstrap = (cluster.get("spec") or {}).get("bootstrap") or {}
    for method in BOOTSTRAP_METHODS:
        secret = (bootstrap.get(method) or {}).get("secret") or {}
        if secret.get("name"):
            return SecretChoice(str(secret["name"]), "app", f"spec.bootstrap.{method}.secret")
    return SecretChoice(f"{name}-app", "app", f"{name}-app (the operator's default name)")


def superuser_secret(cluster: Mapping[str, Any]) -> SecretChoice | None:
    """None when superuser access is disabled (the operator's default: the postgres user has
    no password then)."""
    spec = cluster.get("spec") or {}
    if spec.get("enableSuperuserAccess") is not True:
        return None
    name = str((cluster.get("metadata") or {}).get("name"))
    secret = spec.get("superuserSecret") or {}
    if secret.get("name"):
        return SecretChoice(str(secret["name"]), "superuser", "spec.superuserSecret")
    return SecretChoice(f"{name}-superuser", "superuser", f"{name}-superuser (the default name)")


def choose_secret(cluster: Mapping[str, Any], wanted: Credentials) -> SecretChoice:
    """auto: the superuser's when its access is enabled (it may create databases), else the
    application user's; app or superuser when the target says so."""
    superuser = superuser_secret(cluster)
    if wanted == "app":
        return app_secret(cluster)
    if wanted == "superuser":
        if superuser is None:
            name = (cluster.get("metadata") or {}).get("name")
            raise UsageError(
                f"Cluster {name} has superuser access disabled (spec.enableSuperuserAccess): "
                "there are no superuser credentials to use",
                "drop ?credentials=superuser (the app user's are used, and a Database "
                "resource makes howfast's database)",
            )
        return superuser
    return superuser or app_secret(cluster)


def _decoded(data: Mapping[str, Any], key: str, secret: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    try:
        return base64.b64decode(str(value), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        # the key is named, never its value
        raise UsageError(f"Secret {secret}: key {key!r} is not base64 text") from None


def published(secret: Mapping[str, Any]) -> Published:
    """The user and password of a secret as the API returns it (`data`: base64)."""
    name = str((secret.get("metadata") or {}).get("name"))
    data = secret.get("data") or {}
    user = next((u for k in USERNAME_KEYS if (u := _decoded(data, k, name))), None)
    password = _decoded(data, PASSWORD_KEY, name)
    if not user or password is None:
        missing = "username" if not user else PASSWORD_KEY
        raise UsageError(f"Secret {name} has no {missing!r} key: not a CloudNativePG user secret")
    return Published(user, password, _decoded(data, "dbname", name))


def application_databases(cluster: Mapping[str, Any]) -> tuple[str, ...]:
    """The databases the Cluster's spec names for its application: never touched."""
    bootstrap = (cluster.get("spec") or {}).get("bootstrap") or {}
    names = {"postgres", "template0", "template1"}
    for method in BOOTSTRAP_METHODS:
        database = (bootstrap.get(method) or {}).get("database")
        if database:
            names.add(str(database))
    if not any((bootstrap.get(m) or {}).get("database") for m in BOOTSTRAP_METHODS):
        names.add("app")  # the operator's default application database
    return tuple(sorted(names))
