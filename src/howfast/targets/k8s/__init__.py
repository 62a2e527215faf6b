"""Kubernetes targets (`k8s://CLASS`): PostgreSQL in a pod on a volume of a StorageClass.

spec.py       the --target text and the options (pure)
manifests.py  every object the run creates, as dicts (pure; what --dry-run prints)
facts.py      the environment record from API objects (pure)
cluster.py    the API client: create, wait with watches, exec, port-forward, delete
target.py     the Target: provision, describe, restart, stop
cleanup.py    what killed runs left, found by label
"""
