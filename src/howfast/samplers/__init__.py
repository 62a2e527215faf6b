"""Samplers: what the disks, the CPUs and PostgreSQL did during each step (docs/samplers.md).

One small interface (base.Sampler: start, stop -> SamplerResult); one module per source:
diskstats (block devices per role), cpu (CPU, page cache, the load generator's CPU), pgstats
(statistics views), checkpoints (the server log), cgroupmem (the server's memory cgroup). Each
declares a module-level `SAMPLER` (plugin.SamplerPlugin: which workloads, how to make it for
a target); registry.py finds them, session.py runs them around a step.
"""
