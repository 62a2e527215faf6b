"""What `--in-cluster` refuses before anything is created (targets/k8s/incluster_checks.py):
an argument or a plan file that carries a credential, in every form it recognises, and a
`--howfast-image` that is no image reference. Pure functions, then the command itself under
--dry-run (no cluster is reached)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from howfast.cli import main
from howfast.cli.context import CliEnv
from howfast.targets.k8s.incluster_checks import (
    argument_credential,
    credential_refusal,
    image_refusal,
    names_credential,
    plan_credential_refusal,
)

PW = "Pl4nted-9xQ"  # planted: must appear in no message

CARRIES = [
    # URIs with user:password@
    f"--prometheus=http://me:{PW}@127.0.0.1:9090",
    f"postgresql://bench:{PW}@db.example:5432/postgres",
    f"redis://:{PW}@127.0.0.1:6379/0",
    f"https://user:{PW}@example.com/path?x=1",
    f"5s:exec=psql postgresql://u:{PW}@h/d -c 'select 1'",
    # user:password@host with no scheme
    f"5s:exec=mysqldump bench:{PW}@db",
    # password= in libpq keyword strings and query parameters
    f"host=db user=bench password={PW}",
    f"host=db password = '{PW} x'",
    f"postgresql://db/postgres?sslmode=require&password={PW}",
    f"k8s://fast?replicas=1&token={PW}",
    f"5s:exec=psql 'host=h password={PW}'",
    # assignments: PGPASSWORD=, api tokens, client secrets, --set
    f"5s:exec=env PGPASSWORD={PW} psql -c 'select 1'",
    f"5s:exec=env DB_PASSWORD={PW} ./load.sh",
    f"5s:exec=env AWS_SECRET_ACCESS_KEY={PW} aws s3 ls",
    f"5s:exec=deploy --api-key={PW}",
    f"5s:exec=notify api_token={PW}",
    f"client_secret={PW}",
    # -u user:password, attached or not, and --user
    f"5s:exec=curl -u admin:{PW} http://127.0.0.1:8080/",
    f"5s:exec=curl -uadmin:{PW} http://127.0.0.1:8080/",
    f"5s:exec=curl --user admin:{PW} http://127.0.0.1:8080/",
    f"5s:exec=curl --user=admin:{PW} http://127.0.0.1:8080/",
    f"5s:exec=curl --proxy-user admin:{PW} http://127.0.0.1:8080/",
    # --password VALUE and its kin
    f"5s:exec=tool --password {PW}",
    f"5s:exec=tool --password={PW}",
    f"5s:exec=tool --token {PW}",
    f"5s:exec=tool --db-pass {PW}",
    # headers
    f"5s:exec=curl -H 'Authorization: Bearer {PW}' http://127.0.0.1/",
    f'5s:exec=curl -H "Proxy-Authorization: Basic {PW}" http://127.0.0.1/',
    f"5s:exec=curl -H 'X-Api-Key: {PW}' http://127.0.0.1/",
    f"5s:exec=curl -H 'Cookie: session={PW}' http://127.0.0.1/",
    # quotes that do not close: split by spaces, still found
    f"5s:exec=curl -u 'admin:{PW} http://127.0.0.1/",
]

CLEAN = [
    "quick",
    "--target",
    "k8s://fast?replicas=1&sync=remote_write",
    "--set",
    "password_encryption=scram-sha-256",  # a PostgreSQL setting, not a password
    "shared_buffers=1GB",
    "5s:exec=curl -u admin http://127.0.0.1:8080/",  # curl asks: no password given
    "5s:exec=psql -U bench -c 'select 1'",
    "5s:exec=sh -c 'curl -u admin:$TOKEN http://x/'",  # a variable's name, not its value
    "5s:exec=env PGPASSWORD=${SECRET} psql",
    "5s:exec=psql 'host=h passfile=/etc/pgpass'",
    "5s:exec=ssh bench@db.example uptime",
    "5s:exec=docker pull nginx:1.25@sha256:" + "a" * 64,
    "5s:exec=curl -H 'Accept: application/json' http://127.0.0.1/",
    "5s:exec=psql --password -h db",  # prompts: the next word is an option
    "20s:restart",
    "1m30s:failover",
    "http://127.0.0.1:9090",
    "--namespace",
    "bench",
]


@pytest.mark.parametrize("arg", CARRIES)
def test_every_form_of_a_credential_is_found(arg: str) -> None:
    found = argument_credential(arg)
    assert found is not None, arg
    assert PW in found.secret, (arg, found)


@pytest.mark.parametrize("arg", CLEAN)
def test_what_carries_none_passes(arg: str) -> None:
    assert argument_credential(arg) is None, arg


@pytest.mark.parametrize("arg", CARRIES)
def test_the_refusal_names_the_argument_without_the_credential(arg: str) -> None:
    args = ["quick", "--target", "k8s://fast", "--event", arg, "--namespace", "bench"]
    why = credential_refusal(args, "bench")
    assert why is not None and PW not in why
    assert why.startswith("--in-cluster: the argument") and "of --event" in why
    assert "carries a credential" in why and "namespace bench" in why
    assert "run's Secret" in why and "Secret of your own" in why  # what to do instead


def test_clean_arguments_are_accepted() -> None:
    assert credential_refusal(CLEAN, "bench") is None


def test_names_of_credentials() -> None:
    credentials = "password PGPASSWORD db_password client_secret api_token X-Api-Key apikey"
    for name in [*credentials.split(), "secret_key", "access_key", "--passwd", "pwd", "pass"]:
        assert names_credential(name), name
    others = "password_encryption passfile bypass user keys sort_key tokenizer host"
    for name in [*others.split(), "ssl_passphrase_command"]:
        assert not names_credential(name), name


def test_a_plan_file_with_a_credential_is_refused() -> None:
    plan = {
        "steps": [
            {
                "workload": "pgbench",
                "events": [
                    "2s:checkpoint",
                    {"at": "5s", "exec": ["curl", "-u", f"admin:{PW}", "http://127.0.0.1/"]},
                ],
            }
        ]
    }
    why = plan_credential_refusal(plan, "plan.toml", "bench")
    assert why is not None and PW not in why
    assert "plan file plan.toml" in why and "USER:PASSWORD after -u" in why
    clean = {"steps": [{"events": ["2s:checkpoint", {"at": "5s", "exec": ["curl", "-u", "a"]}]}]}
    assert plan_credential_refusal(clean, "plan.toml", "bench") is None


# -- the image ----------------------------------------------------------------------------
GOOD_IMAGES = [
    "howfast",
    "i:1",
    "howfast:0.9",
    "registry.example/howfast:1",
    "localhost:5000/team/howfast:latest",
    "localhost/pgfio:15",
    "ghcr.io/some-org/how_fast__x/y.z:v1.2-rc_3",
    "[::1]:5000/howfast:1",
    "howfast@sha256:" + "0123456789abcdef" * 4,
    "registry.example:443/howfast:1@sha256:" + "ab" * 32,
    "a" * 255,
]
BAD_IMAGES = {
    "": "is empty",
    "   ": "is empty",
    "howfast\n--privileged": "control character",
    "howfast:1\t": "control character",
    "howfast\x00": "control character",
    "how fast": "holds spaces",
    "howfast: 1": "holds spaces",
    "--privileged": "starts with '-'",
    "-howfast": "starts with '-'",
    "HowFast:1": "is not an image reference",
    "howfast:": "is not an image reference",
    "howfast:-1": "is not an image reference",
    "howfast@sha256:abc": "is not an image reference",
    "howfast@md5": "is not an image reference",
    "/howfast": "is not an image reference",
    "howfast/": "is not an image reference",
    "registry.example//howfast": "is not an image reference",
    "howfast:" + "t" * 129: "is not an image reference",
    "how..fast": "is not an image reference",
    "howfast;rm -rf": "holds spaces",
    "howfast$(id)": "is not an image reference",
    "a" * 256: "longer than 255",
}


@pytest.mark.parametrize("image", GOOD_IMAGES)
def test_image_references_are_accepted(image: str) -> None:
    assert image_refusal(image) is None


@pytest.mark.parametrize(("image", "said"), BAD_IMAGES.items())
def test_what_is_no_image_reference_is_refused(image: str, said: str) -> None:
    why = image_refusal(image, "HOWFAST_K8S_HOWFAST_IMAGE")
    assert why is not None and said in why, why
    assert why.startswith("HOWFAST_K8S_HOWFAST_IMAGE")


# -- the command: refused before anything is created, also under --dry-run ----------------
def _run(args: list[str], tmp_path: Path, **environ: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = CliEnv(
        stdout=out,
        stderr=err,
        environ={"HOWFAST_STORE": str(tmp_path / "store.db"), **environ},
        terminal=False,
    )
    return main(args, env), out.getvalue(), err.getvalue()


BASE = ["run", "quick", "--target", "k8s://fast", "--in-cluster", "--dry-run"]


@pytest.mark.parametrize(
    "extra",
    [
        ["--event", f"5s:exec=curl -u admin:{PW} http://127.0.0.1/"],
        ["--event", f"5s:exec=env PGPASSWORD={PW} psql"],
        ["--prometheus", f"http://me:{PW}@127.0.0.1:9090"],
        ["--event", f"5s:exec=curl -H 'Authorization: Bearer {PW}' http://127.0.0.1/"],
    ],
)
def test_run_in_cluster_refuses_a_credential_under_dry_run(tmp_path: Path, extra: list[str]):
    status, out, err = _run([*BASE, "--howfast-image", "howfast:1", *extra], tmp_path)
    assert status == 2, err
    assert "carries a credential" in err and out == ""
    assert PW not in out + err
    assert not (tmp_path / "store.db").exists()  # nothing stored, nothing made


def test_run_in_cluster_refuses_a_credential_in_its_plan_file(tmp_path: Path):
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[[steps]]\nworkload = "pgbench"\nmode = "tpcb-like"\nduration = "20s"\n'
        f'events = [{{at = "5s", exec = ["curl", "-u", "admin:{PW}", "http://x/"]}}]\n'
    )
    status, out, err = _run(
        ["run", str(plan), "--target", "k8s://fast", "--in-cluster", "--dry-run",
         "--howfast-image", "howfast:1"],
        tmp_path,
    )  # fmt: skip
    assert status == 2, err
    assert f"plan file {plan}" in err and PW not in out + err


@pytest.mark.parametrize(
    ("given", "environ", "said"),
    [
        (["--howfast-image", "--privileged"], {}, "--howfast-image '--privileged' starts with"),
        (["--howfast-image", " "], {}, "--howfast-image is empty"),
        (["--howfast-image", "howfast:1\n"], {}, "control character"),
        ([], {"HOWFAST_K8S_HOWFAST_IMAGE": "Bad Image"}, "HOWFAST_K8S_HOWFAST_IMAGE 'Bad Image'"),
    ],
)
def test_run_in_cluster_refuses_a_bad_image(
    tmp_path: Path, given: list[str], environ: dict[str, str], said: str
):
    status, out, err = _run([*BASE, *given], tmp_path, **environ)
    assert status == 2 and said in err, err
    assert out == ""


def test_a_good_image_still_makes_the_manifests(tmp_path: Path):
    status, out, err = _run(
        [*BASE, "--json", "--howfast-image", "localhost:5000/howfast:1"], tmp_path
    )
    assert status == 0, err
    (job,) = [m for m in json.loads(out)["in_cluster"]["manifests"] if m["kind"] == "Job"]
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "localhost:5000/howfast:1"
