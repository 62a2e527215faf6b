"""The names every object of a run shares (labels, the server's user, where its configuration
is mounted): read by manifests.py and network.py alike, so neither imports the other."""

from __future__ import annotations

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "howfast"
RUN_LABEL = "howfast.dev/run"
SUPERUSER = "howfast"
CONFIG_MOUNT = "/etc/howfast"
CORDONED_BY = "howfast.dev/cordoned-by"  # on a node a drain event cordoned: the run's token


def labels(token: str) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, RUN_LABEL: token}
