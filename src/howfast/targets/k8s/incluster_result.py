"""How the run file of an in-cluster run leaves its pod: printed at the end of the pod's log,
gzip-compressed and base64-encoded between two marker lines, the second one carrying the
SHA-256 of the run file. Pure.

The log is what outlives the pod's process (a finished Job's pod cannot be exec'd into) and
what the API server serves to anyone allowed pods/log. Short base64 lines pass through the
container runtime's line splitting, and compression keeps a long run's series well below the
kubelet's log rotation size (10 MiB by default).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
from collections.abc import Iterable

from howfast.errors import HowfastError

BEGIN = "----- howfast run file (gzip, base64) -----"
END_PREFIX = "----- end of howfast run file, sha256 "
END_SUFFIX = " -----"
WIDTH = 76


def encode(run_file: str) -> list[str]:
    """The lines that carry `run_file` (the text of `howfast export json`)."""
    data = run_file.encode()
    packed = base64.b64encode(gzip.compress(data, mtime=0)).decode()
    body = [packed[i : i + WIDTH] for i in range(0, len(packed), WIDTH)]
    return [BEGIN, *body, f"{END_PREFIX}{hashlib.sha256(data).hexdigest()}{END_SUFFIX}"]


class LogLines:
    """Which lines of a followed log are progress for the person (the carried block is not)."""

    def __init__(self) -> None:
        self.inside = False

    def is_progress(self, line: str) -> bool:
        line = line.rstrip("\r\n")
        if line == BEGIN:
            self.inside = True
        elif self.inside and line.startswith(END_PREFIX):
            self.inside = False
            return False
        return not self.inside


def decode(lines: Iterable[str]) -> str | None:
    """The run file carried by the last complete block of `lines`; None when no block
    ended (the pod stopped before printing one). A damaged block is an error."""
    found: str | None = None
    body: list[str] | None = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line == BEGIN:
            body = []
        elif body is not None and line.startswith(END_PREFIX) and line.endswith(END_SUFFIX):
            digest = line[len(END_PREFIX) : -len(END_SUFFIX)]
            found = _unpack(body, digest)
            body = None
        elif body is not None:
            body.append(line.strip())
    return found


def _unpack(body: list[str], digest: str) -> str:
    try:
        data = gzip.decompress(base64.b64decode("".join(body), validate=True))
    except (binascii.Error, OSError, EOFError) as exc:
        raise HowfastError(f"the run file in the pod's log is damaged: {exc}") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise HowfastError("the run file in the pod's log is damaged: its SHA-256 differs")
    return data.decode()
