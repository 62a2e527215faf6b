"""howfast started by an ordinary user: PostgreSQL runs as that user, nothing needs root.

On this machine the tests run as root, so the test switches to the unprivileged `postgres`
(or `howfast`) user for the howfast process itself; it is skipped where that is impossible.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pg_os_user
from tests.integration.conftest import TINY_PLAN

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to another user"),
]


def _interpreter_for(uid: int, gid: int) -> tuple[str | None, str]:
    """The venv's interpreter may live under /root (pyenv); the system python3 of the same
    version can use the venv's packages through PYTHONPATH."""
    import howfast

    src = str(Path(howfast.__file__).parent.parent)
    site = next(p for p in sys.path if p.endswith("site-packages") and ".venv" in p)
    pythonpath = f"{src}:{site}"
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            probe = subprocess.run(
                [python, "-c", "import howfast, psycopg, numpy"],
                user=uid,
                group=gid,
                env={**os.environ, "PYTHONPATH": pythonpath},
                capture_output=True,
                check=False,
            )
        except OSError:
            continue
        if probe.returncode == 0:
            return python, pythonpath
    return None, pythonpath


def test_run_as_an_unprivileged_user(target_dir: Path):
    user = pg_os_user()
    assert user is not None
    python, pythonpath = _interpreter_for(user.pw_uid, user.pw_gid)
    if python is None:
        pytest.skip(f"no Python with howfast's packages is readable by user {user.pw_name}")
    base = target_dir.parent
    for path in (base, target_dir):
        os.chown(path, user.pw_uid, user.pw_gid)
    plan = base / "tiny.toml"
    plan.write_text(TINY_PLAN.replace('"tpcb-like", "simple-update"', ""))
    store = base / "results.db"
    env = {**os.environ, "HOWFAST_STORE": str(store), "HOME": str(base), "PYTHONPATH": pythonpath}
    out = subprocess.run(
        [python, "-m", "howfast", "run", str(plan), "--target", str(target_dir), "--json"],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        env=env,
        cwd=base,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [s["status"] for s in doc["steps"]] == ["completed", "completed"]
    assert store.stat().st_uid == user.pw_uid  # the user's own store, not root's
    assert list(target_dir.iterdir()) == []
