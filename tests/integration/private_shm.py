"""Run a command with a /dev/shm of its own, then report what it left there.

    unshare --mount --propagation private python private_shm.py RESULT.json -- COMMAND...

Tests that check "nothing left in /dev/shm" use it: the machine's /dev/shm is shared with
every other howfast session running at the same time (the Kubernetes lab tests run beside
the others), whose directories would otherwise count as this command's leftovers. Needs root
(a mount namespace and a mount). SIGINT and SIGTERM are passed on to the command, so that a
test's time-out stops howfast the way a user would (tests/integration/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys


def main() -> int:
    result, separator, *command = sys.argv[1:]
    assert separator == "--" and command
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "mode=1777,size=512m", "howfast-test-shm", "/dev/shm"],
        check=True,
    )
    child = subprocess.Popen(command)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    status = child.wait()
    with open(result, "w") as out:
        json.dump(sorted(os.listdir("/dev/shm")), out)
    return status


if __name__ == "__main__":
    sys.exit(main())
