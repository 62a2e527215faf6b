"""pgbench-init, the load of pgbench's tables: a workload of its own (plan.py), run by the
pgbench package's executor."""
