"""`python -m howfast` and the `howfast` command. The modules load inside `run`, so that a
Ctrl-C while they load (a second or more on a busy machine) is an interruption, not a
traceback."""

import sys


def run() -> None:
    from howfast import early_signal

    early_signal.install()
    try:
        from howfast.cli import main
    except KeyboardInterrupt:  # nothing has started yet
        sys.stderr.write("howfast: interrupted\n")
        sys.exit(130)
    main()


if __name__ == "__main__":
    run()
