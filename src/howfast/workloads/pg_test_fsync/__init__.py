"""pg_test_fsync, PostgreSQL's flush-method probe: plan.py declares it, workload.py runs it,
parse.py reads its output."""
