"""Events during a step (issue 29, docs/events.md): one module per action, found by
registry.py; the schedule applies them in a thread while the load runs; checks.py refuses,
before anything starts, an event a target cannot take."""
