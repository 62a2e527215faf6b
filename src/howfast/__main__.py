"""`python -m howfast`, the `howfast` command and `kubectl-howfast`, the kubectl plugin. The
modules load inside `run`, so that a Ctrl-C while they load (a second or more on a busy
machine) is an interruption, not a traceback."""

import os
import sys

# Nothing else before early_signal.install(): a Ctrl-C while `typing` loaded (10 ms) was a
# traceback.


def run() -> None:
    from howfast import early_signal

    early_signal.install()
    try:
        from howfast.cli import main
    except KeyboardInterrupt:  # nothing has started yet
        raise SystemExit(_interrupted()) from None
    if early_signal.received:  # came where Python could only drop it (early_signal.py)
        raise SystemExit(_interrupted())
    _exit(main())


def _interrupted() -> int:
    sys.stderr.write("howfast: interrupted\n")
    _forget_keyboard_interrupt()
    return 130


def _exit(status: int) -> None:
    _forget_keyboard_interrupt()
    sys.exit(status)


def _forget_keyboard_interrupt() -> None:
    """Exit with the status howfast chose, not by SIGINT. CPython (3.11, 3.12) notes a
    KeyboardInterrupt that ends code run from a string (`exec`: the methods dataclasses and
    namedtuples generate while modules load) even when it is caught, and under `python -m`
    then kills the process with SIGINT after a clean shutdown: a Ctrl-C during the loading
    ended with "interrupted" but no status 130 (a loaded test run). Running a string resets
    that note."""
    exec("")


def run_kubectl() -> None:
    """`kubectl howfast ...` (kubectl runs `kubectl-howfast` from the PATH): howfast with
    kubectl's -n, --context and --kubeconfig (cli/kubectl_args.py, docs/kubectl.md)."""
    from howfast import early_signal

    early_signal.install()
    try:
        from howfast.cli import main
        from howfast.cli.kubectl_args import PROG, translate
        from howfast.errors import ExitStatus, UsageError
    except KeyboardInterrupt:
        raise SystemExit(_interrupted()) from None
    if early_signal.received:
        raise SystemExit(_interrupted())
    try:
        translated = translate(sys.argv[1:])
    except UsageError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        sys.exit(int(ExitStatus.USAGE))
    if translated.kubeconfig is not None:  # read by the Kubernetes target when it loads it
        os.environ["KUBECONFIG"] = translated.kubeconfig
    _exit(main(translated.argv, prog_name=PROG))


if __name__ == "__main__":
    run()
