"""A sampler added as one package and nothing else (issue 36): the toy reads this machine's
load average around each sampled step and puts what it saw in a section of its own,
`loadavg`, of the step's document. tests/unit/test_declared_lists.py installs it as a
distribution would (an entry point in the `howfast.samplers` group)."""
