"""What a workload plug-in declares, and where plug-ins are found: the layer between the
shared vocabulary and everything that plans, runs or reads steps (docs/architecture.md).

- workload.py: WorkloadPlugin (step model, expansion, labels, duration, metrics, traits, the
  executor's name) and StepModel, ExpandContext;
- fields.py: the value types plan files are written in;
- overrides.py: the command line's changes to a plan (Overrides);
- registry.py: discovery of the workloads' plan modules.

Light to import: nothing here imports an executor, a host, a target or analysis.
"""
