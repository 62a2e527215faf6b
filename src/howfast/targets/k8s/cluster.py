"""The Kubernetes API, through the official client: one Cluster per kubeconfig context, made
of parts a reader can hold in mind (docs/architecture.md): the client and its bounded calls
(clusterapi.py), reads (cluster_reads.py), creating and deleting a run's objects by label
(cluster_objects.py), waiting on pods with watches (cluster_pods.py), exec and port-forward
(cluster_streams.py).
"""

from __future__ import annotations

from howfast.targets.k8s.cluster_objects import ClusterObjects
from howfast.targets.k8s.cluster_pods import STUCK_REASONS, ClusterPods, pod_problem, pod_ready
from howfast.targets.k8s.cluster_streams import ClusterStreams, PortForward, forwarded
from howfast.targets.k8s.clusterapi import kubeconfig_namespace

__all__ = [
    "STUCK_REASONS",
    "Cluster",
    "PortForward",
    "forwarded",
    "kubeconfig_namespace",
    "pod_problem",
    "pod_ready",
]


class Cluster(ClusterPods, ClusterObjects, ClusterStreams):
    """One API client for one kubeconfig context."""
