"""A workload added as one package and nothing else (issue 27): the toy sums `rows` numbers
with psql, `queries` times, and reports how fast. tests/toy_workload/test_toy_workload.py
installs it as a distribution would (an entry point in the `howfast.workloads` group) and
runs it through howfast end to end."""
