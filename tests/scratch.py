"""Where the tests make their directories on the machine's disk: one directory per test
process in /var/tmp, removed when the process ends, marked as the top of a directory tree
for ext4's allocator (`chattr +T`), so that the directories made in it are spread over the
filesystem's block groups instead of crowding /var/tmp's.

Why: on an ext4 without a journal (as this project's machines' root), a new file may not
take an inode freed in the last minute or so, and finding one walks past every such inode
of the group, reading its inode table block each time. The suite makes and removes
thousands of files a minute (each initdb about a thousand), so in one group initdb took
0.9-1.3 s of CPU, 0.3 s in a group of its own (measured here, interleaved, after the same
churn; perf: find_inode_bit / recently_deleted). Elsewhere `chattr` fails or is missing and
the directories stay where ext4 puts them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

_root: Path | None = None


def scratch_root() -> Path:
    """This process's directory for the tests' directories (0755: PostgreSQL's OS user
    reaches what the tests make in it)."""
    global _root
    if _root is None:
        root = Path(tempfile.mkdtemp(prefix="howfast-tests-", dir="/var/tmp"))
        root.chmod(0o755)
        if shutil.which("chattr"):
            subprocess.run(["chattr", "+T", str(root)], capture_output=True, check=False)
        atexit.register(_remove, root, os.getpid())
        _root = root
    return _root


def _remove(root: Path, maker: int) -> None:
    if os.getpid() == maker:  # not in a forked child that exits through Python
        shutil.rmtree(root, ignore_errors=True)


def scratch_dir(prefix: str) -> Path:
    """A new directory on the machine's disk, 0755, in this process's scratch root."""
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root()))
    directory.chmod(0o755)
    return directory
