"""The local target: a throwaway PostgreSQL cluster howfast creates with initdb in a directory
it owns, built from parts (target.py says which)."""

from howfast.targets.local.client import client_placement
from howfast.targets.local.earlier import check_earlier_clusters
from howfast.targets.local.options import (
    SUPERUSER,
    TCP_ADDRESS,
    LocalClient,
    LocalOptions,
    StandbyPlacement,
)
from howfast.targets.local.server import base_settings, start_failure
from howfast.targets.local.target import LocalTarget
from howfast.targets.local_server import conf_line

__all__ = [
    "SUPERUSER",
    "TCP_ADDRESS",
    "LocalClient",
    "LocalOptions",
    "LocalTarget",
    "StandbyPlacement",
    "base_settings",
    "check_earlier_clusters",
    "client_placement",
    "conf_line",
    "start_failure",
]
