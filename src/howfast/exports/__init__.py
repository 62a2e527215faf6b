"""Runs leaving the store and coming back: `export json` and `import run` (runfile.py,
restore.py; a run file's values checked in runcheck.py), flat rows for pipelines (`export
csv|ndjson`, rows.py), written atomically (output.py). Builders and parsers are pure; the
commands in cli/ are thin."""
