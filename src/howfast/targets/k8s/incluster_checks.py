"""What `--in-cluster` refuses before anything is created (also under --dry-run). Pure.

- An argument that carries a credential: every argument of the Job's `howfast run` is
  written into the Job's manifest (and the owner's annotation), which anyone who may read
  Jobs or pods in the namespace reads. Recognised: a URI's `user:password@`, `password=`
  (and `PGPASSWORD=`, `api_token=`, `client_secret=`..., in libpq keyword strings, query
  parameters, `--set`, `env NAME=VALUE`), `-u`/`--user USER:PASSWORD` (curl and the like),
  `--password VALUE` (and `--token`, `--api-key`...), `Authorization:` headers, and
  everything the project's redaction hides (redact.py). A value that only names a variable
  (`$TOKEN`, `${TOKEN}`) is no credential.
- A `--howfast-image` that is no image reference (the OCI/Docker grammar: name[:tag][@digest]).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from howfast.redact import MASK, passwords_in, redact_text

# A word that names a credential as a key, an option or a header's last part.
_CREDENTIAL_PARTS = {
    "password",
    "passwd",
    "pwd",
    "pass",
    "secret",
    "token",
    "apikey",
    "credentials",
}
_CREDENTIAL_SUFFIXES = ("password", "passwd", "secret", "token", "apikey", "api_key", "api-key")
_USER_OPTIONS = {"-u", "--user", "-U", "--proxy-user", "--proxy-u"}
_AUTH_HEADERS = {"authorization", "proxy-authorization", "cookie"}
_REFERENCE = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)\Z")
# user:password@host with no scheme (ssh-like, mysql's, redis's); not an image's name:tag@digest.
_BARE_USERINFO = re.compile(
    r"(?:^|[\s=(\"'])([^\s:@/=]+):([^\s@/=]+)@(?![A-Za-z][A-Za-z0-9+._-]*:[0-9a-fA-F]{32})[^\s@]"
)
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://([^/\s?#]*)@")


@dataclass(frozen=True)
class Found:
    form: str  # how it was recognised, for the message
    secret: str  # to hide when the argument is shown


def names_credential(key: str) -> bool:
    """`password`, `PGPASSWORD`, `db_password`, `client_secret`, `X-Api-Key`, `api_token`...
    but not `password_encryption` (a PostgreSQL setting) nor `passfile` (a file's name)."""
    key = key.lower().lstrip("-")
    if key.endswith(_CREDENTIAL_SUFFIXES):
        return True
    parts = [p for p in re.split(r"[_.\-]", key) if p]
    if not parts:
        return False
    if parts[-1] in _CREDENTIAL_PARTS or "secret" in parts:
        return True
    return len(parts) >= 2 and parts[-1] == "key" and parts[-2] in ("api", "access", "private")


def _is_value(text: str) -> bool:
    """A credential's value: not empty, not only a variable's name."""
    text = text.strip().strip("'\"")
    return bool(text) and not _REFERENCE.match(text)


def _words(arg: str) -> list[str]:
    """The argument split as a shell would (an event's `exec=curl -u a:b URL`); by spaces when
    its quotes do not close."""
    try:
        return shlex.split(arg)
    except ValueError:
        return arg.split()


def _in_word(word: str) -> Found | None:
    for uri in _URI.finditer(word):
        password = uri[1].partition(":")[2]
        if password and _is_value(password):
            return Found("a password in a URI (user:password@)", password)
    bare = _BARE_USERINFO.search(word)
    if bare and _is_value(bare[2]):
        return Found("a user:password@host", bare[2])
    header, colon, rest = word.partition(":")
    header = header.strip()
    is_header = header.lower() in _AUTH_HEADERS or names_credential(header)
    if colon and is_header and " " not in header and _is_value(rest):
        return Found(f"the header {header}:", rest.strip())
    for piece in re.split(r"[?&;,]", word):
        key, equals, value = piece.partition("=")
        name = re.search(r"[A-Za-z][A-Za-z0-9_.\-]*\Z", key)
        if equals and name and names_credential(name[0]) and _is_value(value):
            return Found(f"{name[0]}=VALUE", value)
    return None


def _in_pair(option: str, value: str) -> Found | None:
    """`-u user:password`, `--password VALUE`, `-H 'Authorization: ...'` (two words)."""
    if option in _USER_OPTIONS and ":" in value:
        password = value.split(":", 1)[1]
        if _is_value(password):
            return Found(f"a USER:PASSWORD after {option}", password)
    named = option.startswith("--") and names_credential(option)
    if named and not value.startswith("-") and _is_value(value):
        return Found(f"a value after {option}", value)
    return None


def _attached_user(word: str) -> Found | None:
    """curl's `-uuser:password`, `--user=user:password`."""
    for option in ("--user=", "--proxy-user=", "-u"):
        if word.startswith(option) and word != option.rstrip("="):
            value = word[len(option) :]
            if ":" in value and _is_value(value.split(":", 1)[1]):
                return Found(f"a USER:PASSWORD after {option.rstrip('=')}", value.split(":", 1)[1])
    return None


def credential_in(words: Sequence[str]) -> Found | None:
    """The first credential in a sequence of words (an argv), by itself or with the word
    before it."""
    for i, word in enumerate(words):
        found = _in_word(word) or _attached_user(word)
        if found is None and i + 1 < len(words):
            found = _in_pair(word, words[i + 1])
        if found is not None:
            return found
    return None


def argument_credential(arg: str) -> Found | None:
    """A credential in one argument: in its text (the project's redaction finds it), or
    among its words (an event's command line)."""
    hidden = [p for p in passwords_in(arg) if _is_value(p)]
    if hidden:
        return Found("a password in a connection string", hidden[0])
    return credential_in([arg]) or credential_in(_words(arg))


def credential_refusal(args: Sequence[str], namespace: str) -> str | None:
    """Why the Job cannot be given these `howfast run` arguments (None: it can): the first
    argument that carries a credential, shown with it hidden, and what to do instead."""
    for i, arg in enumerate(args):
        found = argument_credential(arg)
        if found is None:
            continue
        shown = _shown(arg, found.secret)
        option = args[i - 1] if i > 0 and args[i - 1].startswith("-") else None
        which = f"the argument {shown!r}" + (f" of {option}" if option else "")
        return f"--in-cluster: {which} carries a credential ({found.form}){_instead(namespace)}"
    return None


def plan_credential_refusal(plan: object, path: str, namespace: str) -> str | None:
    """The same for a plan file, which goes into the run's ConfigMap: `plan` is its parsed
    text (a dict of TOML); an exec event's exact arguments are one argv."""
    for argv in plan_strings(plan):
        found = next((f for a in argv if (f := argument_credential(a)) is not None), None)
        found = found or credential_in(argv)
        if found is not None:
            shown = _shown(" ".join(argv), found.secret)
            return (
                f"--in-cluster: the plan file {path} carries a credential ({found.form}) in "
                f"{shown!r}{_instead(namespace)}"
            )
    return None


def _instead(namespace: str) -> str:
    return (
        f": what the Job runs is written into its objects, which anyone who may read Jobs, "
        f"pods or ConfigMaps in namespace {namespace} can read. The server's password needs "
        "no argument (howfast makes it and keeps it in the run's Secret; its tools get "
        "PGPASSWORD from there); put another credential in a Secret of your own (the Job's "
        "command may read the namespace's Secrets through the API), or run without "
        "--in-cluster"
    )


def _shown(arg: str, secret: str) -> str:
    """The argument with the credential hidden; all of it hidden when the credential is not
    found in it as written (quotes, escapes)."""
    if secret not in arg:
        return MASK
    return redact_text(arg, secret, *passwords_in(arg))


# -- the image ----------------------------------------------------------------------------
# distribution/reference's grammar (reference/regexp.go), spelled out.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_HOST = rf"(?:{_DOMAIN_NAME}|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?\Z", re.ASCII)
NAME_MAX = 255  # the reference's name, as distribution limits it


def image_refusal(image: str, source: str = "--howfast-image") -> str | None:
    """Why `image` is no image reference the Job can name (None: it is one). `source` says
    where it came from (the option or the environment variable)."""
    example = "e.g. registry.example.com/howfast:0.9 or howfast@sha256:<64 hex digits>"
    if not image.strip():
        return f"{source} is empty: give the image of howfast the Job runs ({example})"
    if any(ord(c) < 32 or ord(c) == 127 for c in image):
        return f"{source} {image!r} holds a control character (a newline, a tab): {example}"
    if any(c.isspace() for c in image):
        return f"{source} {image!r} holds spaces: an image reference has none ({example})"
    if image.startswith("-"):
        return (
            f"{source} {image!r} starts with '-': it looks like an option, not an image ({example})"
        )
    match = IMAGE_REFERENCE.match(image)
    if match is None:
        return (
            f"{source} {image!r} is not an image reference: [REGISTRY[:PORT]/]NAME[:TAG]"
            f"[@DIGEST], the name in lower case ({example})"
        )
    if len(match["name"]) > NAME_MAX:
        return f"{source}: the image's name is longer than {NAME_MAX} characters"
    return None


def plan_strings(value: object) -> Iterable[Sequence[str]]:
    """Every string of a parsed plan file, as argvs: a list of strings is one (an exec
    event's exact arguments), any other string its own."""
    if isinstance(value, str):
        yield [value]
    elif isinstance(value, dict):
        for item in value.values():
            yield from plan_strings(item)
    elif isinstance(value, list):
        strings = [v for v in value if isinstance(v, str)]
        if strings:
            yield strings
        for item in value:
            if not isinstance(item, str):
                yield from plan_strings(item)
