"""What an exec event's command is given to run with, and what is hidden from its recorded
output (docs/events.md#an-exec-events-environment). Pure.

The command gets what a program needs to run here (PATH, HOME, the locale, the time zone),
where the server is (PGHOST, PGPORT, PGDATABASE, PGUSER and libpq's connection options, never
a password), the event's own HOWFAST_EVENT_AT and HOWFAST_TARGET, and the variables of
howfast's environment the user names in HOWFAST_EXEC_ENV. Nothing else of howfast's
environment: not PGPASSWORD, not HOWFAST_STORE, not a cloud key the shell happened to hold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from howfast.redact import passwords_in, redact_text
from howfast.targets.base import Connection

NAMED_ENV = "HOWFAST_EXEC_ENV"  # the user's names of further variables to pass
KEPT_NAMES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR")
KEPT_PREFIXES = ("LC_",)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SEPARATORS = re.compile(r"[\s,]+")


def named_variables(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The names HOWFAST_EXEC_ENV lists (commas or spaces between them); ValueError naming
    the first that is not a variable's name."""
    text = environ.get(NAMED_ENV, "")
    names = tuple(n for n in _SEPARATORS.split(text) if n)
    for name in names:
        if not _NAME.match(name):
            raise ValueError(
                f"{NAMED_ENV}: {name!r} is not an environment variable's name (letters, digits "
                "and _, not first a digit); list names separated by commas, e.g. "
                f"{NAMED_ENV}=AWS_PROFILE,KUBECONFIG"
            )
    return names


def exec_environment(
    environ: Mapping[str, str],
    connection: Connection | None,
    *,
    event_at: str,
    target: str,
) -> dict[str, str]:
    """The exec event's environment, from howfast's own (`environ`) and the server it acts
    on. The event's variables and the server's facts win over a named variable of the same
    name: they say where this event is."""
    env = {
        k: v
        for k, v in environ.items()
        if k in KEPT_NAMES or k.startswith(KEPT_PREFIXES) or k in named_variables(environ)
    }
    if connection is not None:
        env.update(server_variables(connection))
    env["HOWFAST_EVENT_AT"] = event_at
    env["HOWFAST_TARGET"] = target
    return env


def server_variables(connection: Connection) -> dict[str, str]:
    """Where the server is, as libpq reads it from the environment; no password."""
    return {
        "PGHOST": connection.host,
        "PGPORT": str(connection.port),
        "PGDATABASE": connection.dbname,
        "PGUSER": connection.user,
        **connection.options_env(),
    }


def known_secrets(environ: Mapping[str, str], connection: Connection | None) -> list[str]:
    """The passwords howfast knows of, to hide wherever the command's output shows them: the
    server's (from its connection string), howfast's PGPASSWORD, and any a named variable's
    connection string holds. Longest first: one that contains another is hidden whole."""
    found = [environ.get("PGPASSWORD", "")]
    if connection is not None and connection.password:
        found.append(connection.password)
    for name in named_variables(environ):
        found += passwords_in(environ.get(name, ""))
    return sorted({s for s in found if s}, key=len, reverse=True)


def redact_output(text: str, secrets: list[str]) -> str:
    """The command's recorded output with connection strings' passwords and every known
    password hidden."""
    return redact_text(text, *secrets)
