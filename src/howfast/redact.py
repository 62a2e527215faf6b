"""Hide passwords in connection strings before they are shown, logged or stored.

Handles the three places libpq accepts a password: the userinfo of a URI
(`postgresql://user:pw@host/db`), a URI query parameter (`?password=pw`) and the key=value
form (`host=h password=pw`, value possibly single-quoted). When in doubt it hides too much
rather than too little.
"""

from __future__ import annotations

import re
import urllib.parse

MASK = "***"

# scheme://[user]:PASSWORD@ — the password runs to the last "@" before the query, a fragment or
# whitespace, because people do write unencoded "@" in passwords.
_URI_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:@/\s?#]*:)[^\s?#]+(?=@)")
# ?password=… or &password=… in a URI query.
_QUERY_PARAM = re.compile(r"(?P<head>[?&]password=)[^&#\s]*", re.IGNORECASE)
# password=… in key=value form (also PGPASSWORD=…, db_password=…: better too much than too
# little), but not the query parameter above; a quoted value may contain spaces and \' escapes.
_KEYWORD = re.compile(
    r"(?P<head>(?<![?&])password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|[^\s']+)", re.IGNORECASE
)


def redact_dsn(dsn: str) -> str:
    """Return `dsn` with every password replaced by `***`; other text is left as it was.
    Works on a bare DSN and on text that contains one."""
    redacted = _URI_USERINFO.sub(lambda m: m["head"] + MASK, dsn)
    redacted = _QUERY_PARAM.sub(lambda m: m["head"] + MASK, redacted)
    return _KEYWORD.sub(lambda m: m["head"] + MASK, redacted)


def redact_text(text: str, *secrets: str | None) -> str:
    """Redact connection strings anywhere in free text (an error message, a log line), and any
    literal occurrence of the given passwords: drivers may quote them in ways the patterns
    above do not recognise."""
    redacted = redact_dsn(text)
    for secret in secrets:
        if secret:
            redacted = redacted.replace(secret, MASK)
    return redacted


def passwords_in(text: str) -> list[str]:
    """The passwords a connection text holds, as written and as libpq would decode them, even
    when the text is malformed (an unclosed `[`, a bad percent escape): a driver's error
    message may quote any part of it, so `redact_text` can hide them wherever they appear."""
    found: list[str] = []
    for match in _URI_USERINFO.finditer(text):
        found.append(text[match.end("head") : match.end()])
    found += [m[0].split("=", 1)[1] for m in _QUERY_PARAM.finditer(text)]
    for m in _KEYWORD.finditer(text):
        value = m[0][len(m["head"]) :]
        found.append(value)
        if value.startswith("'"):
            found.append(re.sub(r"\\(.)", r"\1", value.strip("'")))
    decoded = [urllib.parse.unquote(value) for value in found]
    # Longest first: a password that contains another is replaced whole.
    return sorted({v for v in found + decoded if v}, key=len, reverse=True)


def redact_nested(value: object) -> object:
    """`value` (JSON-like: dicts, lists, strings, numbers) with every string's connection
    passwords hidden; the store's last guard for what a user typed into a step's params (an
    exec event's command line with a URI, say), which the run itself must keep as typed."""
    if isinstance(value, str):
        return redact_dsn(value)
    if isinstance(value, dict):
        return {key: redact_nested(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_nested(item) for item in value]
    return value
