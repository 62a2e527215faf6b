"""Which published secret, and what it holds; the password in no message nor repr. The
secret is the real operator's `pg-app` (tests/data/cnpg/v1.27.1/, every value recorded as
"placeholder"); the Clusters with a superuser secret and custom bootstrap secrets are
HAND-MADE (tests/data/cnpg/handmade/: the recordings have neither)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from howfast.errors import UsageError
from howfast.targets.cnpg import credentials as cr
from tests.unit.cnpg_objects import load, recorded_item

PASSWORD = "placeholder"  # the recording's value of every key


def app_secret() -> dict[str, Any]:
    return recorded_item("healthy", "secrets.json", "pg-app")


def test_the_secret_comes_from_the_cluster_s_spec() -> None:
    cluster = load("cluster-pg.json")
    assert cr.choose_secret(cluster, "auto") == cr.SecretChoice(
        "pg-superuser", "superuser", "spec.superuserSecret"
    )
    assert cr.choose_secret(cluster, "app").why == "spec.bootstrap.initdb.secret"
    del cluster["spec"]["bootstrap"]["initdb"]["secret"]
    cluster["spec"]["bootstrap"]["initdb"]["secret"] = None
    assert cr.choose_secret(cluster, "app").name == "pg-app"
    cluster["spec"]["bootstrap"] = {"recovery": {"secret": {"name": "restored"}}}
    assert cr.app_secret(cluster).name == "restored"


def test_without_superuser_access_auto_takes_the_app_user_and_superuser_is_refused() -> None:
    small = load("cluster-async.json")
    assert cr.choose_secret(small, "auto") == cr.SecretChoice(
        "small-app", "app", "small-app (the operator's default name)"
    )
    with pytest.raises(UsageError, match="superuser access disabled"):
        cr.choose_secret(small, "superuser")


def test_a_secret_s_user_and_password_and_the_password_is_in_no_repr() -> None:
    secret = app_secret()
    found = cr.published(secret)
    assert (found.user, found.password, found.dbname) == (PASSWORD, PASSWORD, PASSWORD)
    # a password unlike the other values, so that the repr check can fail
    secret["data"]["password"] = base64.b64encode(b"not-a-real-password").decode()
    found = cr.published(secret)
    assert found.password == "not-a-real-password"
    assert "not-a-real-password" not in repr(found)


def test_a_secret_without_a_password_or_with_bad_base64_names_the_key_not_a_value() -> None:
    secret = app_secret()
    del secret["data"]["password"]
    with pytest.raises(UsageError, match="Secret pg-app has no 'password' key"):
        cr.published(secret)
    secret = app_secret()
    secret["data"]["password"] = "%%%not-base64"
    with pytest.raises(UsageError) as caught:
        cr.published(secret)
    assert "'password' is not base64" in str(caught.value)
    assert "not-base64" not in str(caught.value)


def test_the_application_s_databases_are_named_never_to_be_touched() -> None:
    assert cr.application_databases(load("cluster-pg.json")) == (
        "app", "postgres", "template0", "template1",
    )  # fmt: skip
    custom = load("cluster-pg.json")
    custom["spec"]["bootstrap"]["initdb"]["database"] = "shop"
    assert "shop" in cr.application_databases(custom)
    assert "app" not in cr.application_databases(custom)
