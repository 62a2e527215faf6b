"""A Ctrl-C that lands where Python cannot raise it (a __del__, importlib's weakref callbacks)
is remembered and acted on, without the "Exception ignored" traceback a user would see."""

import subprocess
import sys

# The signal comes while a __del__ runs: where it came during an import in a loaded make test.
_DROPPED_IN_DEL = """
import os, signal, time
from howfast import early_signal
early_signal.install()
class Dying:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs here, inside __del__
Dying()
print("received", early_signal.received)
"""


def test_a_ctrl_c_python_must_drop_is_remembered_quietly():
    done = subprocess.run(
        [sys.executable, "-c", _DROPPED_IN_DEL], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "received SIGINT"
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr


def test_other_unraisable_errors_are_still_reported():
    code = _DROPPED_IN_DEL.replace(
        "os.kill(os.getpid(), signal.SIGINT)", "raise ValueError('boom')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "Exception ignored" in done.stderr and "ValueError: boom" in done.stderr
    assert done.stdout.strip() == "received None"


def test_the_command_ends_as_interrupted_once_loaded(tmp_path):
    """__main__ acts on a dropped Ctrl-C as soon as the modules are loaded: status 130."""
    code = (
        "import os, signal, sys\n"
        "from howfast import early_signal\n"
        "early_signal.received = 'SIGINT'\n"  # as the handler leaves it when Python dropped it
        "early_signal.install = lambda: None\n"
        "sys.argv = ['howfast', 'results', 'list']\n"
        "from howfast.__main__ import run\n"
        "run()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip() == "howfast: interrupted"


# A Ctrl-C that ends code run from a string (as the methods dataclasses generate while the
# modules load), caught, then the command's own exit: what a loaded test run saw end by SIGINT.
_CAUGHT_IN_EXEC = """
import sys
from howfast.__main__ import _exit
try:
    exec("raise KeyboardInterrupt")
except KeyboardInterrupt:
    pass
if sys.argv[1:] == ["plain"]:
    sys.exit(130)
_exit(130)
"""


def test_the_exit_status_is_howfasts_after_a_ctrl_c_caught_in_generated_code(tmp_path):
    """Under `python -m` (how the tests run howfast; the `howfast` script is not affected),
    CPython kills the process with SIGINT at exit when a KeyboardInterrupt ended a string's
    `exec`, caught or not; howfast's exit says 130 all the same."""
    (tmp_path / "caught_in_exec.py").write_text(_CAUGHT_IN_EXEC)

    def exit_status(*args: str) -> int:
        argv = [sys.executable, "-m", "caught_in_exec", *args]
        return subprocess.run(argv, cwd=tmp_path, timeout=60, check=False).returncode

    plain = exit_status("plain")  # Python's own behaviour, for the record: -2 on 3.11
    status = exit_status()
    assert status == 130, f"howfast's exit ended as {status} (plain: {plain})"
