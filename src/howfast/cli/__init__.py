"""Command-line entry point (filled in by the CLI module)."""


def main() -> None:
    raise SystemExit(0)
