"""Facts of the machine a server runs on, read where howfast runs: block devices and file
systems (fsinfo, devices), memory and its limits (memory), cgroups (cgroup), a server's own
I/O (serverio, podread: its text as a pod shows it), PostgreSQL installs (pgbin) and the
environment a run records (environment).

Below hosts and targets (docs/architecture.md): hosts read these facts, targets and samplers
use them, and nothing here imports a host, a target or a sampler.
"""
