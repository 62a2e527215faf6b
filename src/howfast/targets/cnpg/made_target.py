"""`k8s://CLASS?operator=cnpg&instances=N&sync=LEVEL`: a CnpgTarget on a Cluster howfast
makes through the operator (made.py builds it), on the class under test; the Cluster goes
at the end with the run's other objects, and howfast waits until its pods and claims are
gone. Only a Cluster named for this run and carrying its label is ever deleted."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from howfast.errors import HowfastError
from howfast.model import TargetRecord
from howfast.targets.base import PlannedTarget
from howfast.targets.cnpg import client as c
from howfast.targets.cnpg import discovery as disc
from howfast.targets.cnpg import made as mk
from howfast.targets.cnpg.api import CnpgApi
from howfast.targets.cnpg.spec import CnpgSpec
from howfast.targets.cnpg.target import CnpgTarget
from howfast.targets.k8s.names import RUN_LABEL
from howfast.targets.k8s.spec import DEFAULT_IMAGE, K8sOptions

HEALTHY_TIMEOUT_S = 600.0  # initdb, then each standby's base backup, one after the other
GONE_TIMEOUT_S = 300.0


class CnpgMadeTarget(CnpgTarget):
    def __init__(
        self, made: mk.MadeSpec, options: K8sOptions, *, settings: Mapping[str, str]
    ) -> None:
        super().__init__(CnpgSpec(made.text, "CLUSTER", None, "superuser"), options)
        self.made_spec = made
        self.settings = dict(settings)
        self.spec = replace(self.spec, cluster=mk.cluster_name(self.token))

    def check(self, *, will_init: bool) -> None:
        """Nothing to read yet: the Cluster is made at start."""
        del will_init

    def _manifest(self, owner: Mapping[str, str] | None) -> dict[str, Any]:
        options = self.options
        image = None if options.image == DEFAULT_IMAGE else options.image
        return mk.cluster_manifest(
            self.made_spec, self.token, self.namespace, owner, self.settings,
            mk.Pods(options.volume_size, image, options.pull_policy),
        )  # fmt: skip

    def planned(self) -> PlannedTarget:
        planned = super().planned()
        owner = {"name": c.owner_name(self.token), "uid": "UID"}
        first, *rest = planned.objects
        return replace(planned, objects=(first, self._manifest(owner), *rest))

    def _ready_cluster(
        self, api: CnpgApi, owner: Mapping[str, str]
    ) -> tuple[dict[str, Any], disc.ClusterLayout]:
        api.create_cluster(self._manifest(owner))
        timeout = max(self.options.start_timeout_s, HEALTHY_TIMEOUT_S)
        deadline = time.monotonic() + timeout
        while True:
            obj, layout = api.layout(self.namespace, self.spec.cluster)
            ready = sum(1 for i in layout.instances if i.ready)
            if disc.not_ready(layout) is None and ready == self.made_spec.instances:
                return obj, layout
            if time.monotonic() > deadline:
                raise HowfastError(
                    f"the Cluster {layout.name} howfast made is not healthy after "
                    f"{timeout:.0f} s (phase: {layout.phase or 'none'}; {ready} of "
                    f"{self.made_spec.instances} instances Ready)"
                )
            time.sleep(2.0)

    def stop(self) -> None:
        api, cluster = self.api, self.cluster
        problems = []
        try:
            super().stop()
        except HowfastError as exc:
            problems.append(str(exc))
        if api is not None and cluster is not None:
            problems += _delete_made(api, self.namespace, self.spec.cluster, self.token)
            self.api = None
        if problems:
            raise HowfastError("; ".join(problems))

    def record(self) -> TargetRecord:
        record = super().record()
        design = record.device.get("cnpg")
        if isinstance(design, dict):
            design = {**design, "made_by_howfast": True}
            return replace(record, device={**record.device, "cnpg": design})
        return record


def _delete_made(api: CnpgApi, namespace: str, name: str, token: str) -> list[str]:
    """The run's Cluster (checked: its name and label are the run's), then until its pods
    and claims are gone."""
    try:
        found = api.read_cluster(namespace, name)
    except HowfastError:
        return []  # gone already (its owner Secret went first)
    if ((found.get("metadata") or {}).get("labels") or {}).get(RUN_LABEL) != token:
        return [f"Cluster {namespace}/{name} is not this run's: left alone"]
    api.delete_cluster(namespace, name)
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while time.monotonic() < deadline:
        left = api.instance_pods(namespace, name) + api.instance_claims(namespace, name)
        if not left:
            return []
        time.sleep(2.0)
    return [f"Cluster {namespace}/{name}'s pods or claims were still there after "
            f"{GONE_TIMEOUT_S:.0f} s"]  # fmt: skip
