"""What commands do, apart from parsing options and printing: the layer between the runner
and the CLI (docs/architecture.md). Today: a run's dry-run document (dryrun.py), the doctor's
checks and install commands (doctor.py, install_hints.py), storing tool output produced
elsewhere (importer.py), and reading stored runs for output (reading.py).
"""
