"""`--dry-run`: every invocation a run would make, built by the same functions that build the
ones that run, printed instead of run. Nothing is created: no directory, cluster or file.

What only the run can decide (a socket directory's random suffix, a free port, a scale chosen
from a measurement, a rate taken from a measured maximum) is an upper-case placeholder, and
the step's note says where it comes from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TextIO

from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue, StepSpec
from howfast.plugin import registry
from howfast.targets.base import PlannedClient, Target
from howfast.workloads import get_workload
from howfast.workloads.base import PlanContext

HEADER = (
    "# {command} --dry-run: nothing is created and nothing runs. Each tool runs in a private\n"
    "# work directory off the storage under test; paths without a directory are relative to\n"
    "# it. Upper-case words (PORT, SCALE, RATE) are decided while the run goes.\n"
)


def plan_document(
    targets: Sequence[Target], steps: Sequence[StepSpec], install: PgInstall
) -> dict[str, JSONValue]:
    """What each target would run, step by step, as JSON data."""
    out: list[JSONValue] = []
    total = len(steps) * len(targets)
    for position, target in enumerate(targets):
        planned = target.planned()
        ctx = PlanContext(
            target=target,
            connection=planned.connection,
            install=install,
            host=planned.host,
            scratch_dir=planned.scratch_dir,
        )
        client = planned.client
        client_ctx = ctx
        if client is not None:  # pgbench and its probe run apart from the server (a pod)
            client_ctx = replace(ctx, host=client.host, connection=client.connection)
        entries: list[JSONValue] = []
        for offset, spec in enumerate(steps):
            workload = get_workload(spec.workload)
            on_client = registry.plugin(spec.workload).client_side
            invocations = [
                {**(p.invocation.document() if p.invocation else {}), "note": p.note}
                for p in workload.planned(client_ctx if on_client else ctx, dict(spec.params))
            ]
            entry: dict[str, JSONValue] = {
                "index": position * len(steps) + offset + 1,
                "of": total,
                "workload": spec.workload,
                "label": workload.label(spec.params),
                # where its tools run: the client's place (a pod) or the target's host
                "host": client.where if client and on_client else planned.host.name,
                "params": dict(spec.params),
                "invocations": invocations,
            }
            entries.append(entry)
        out.append(
            {
                "name": target.name,
                "kind": target.kind,
                "host": planned.host.name,
                "start": [{"what": what, "argv": list(argv)} for what, argv in planned.start],
                # Kubernetes targets: every object start() creates, in order
                "manifests": [dict(o) for o in planned.objects],
                # where pgbench runs when not in the server's place (a client pod), or null
                "client": None if client is None else _client_document(client),
                "steps": entries,
            }
        )
    return {"dry_run": True, "targets": out}


def _client_document(client: PlannedClient) -> dict[str, JSONValue]:
    return {
        "placement": client.placement,
        "node": client.node,
        "host": client.where,
        "manifests": [dict(o) for o in client.objects],
    }


def to_yaml(objects: Sequence[JSONValue]) -> str:
    """Objects (a kind's manifests) as a YAML stream, multi-line strings (a start script) as
    literal blocks."""
    import yaml

    class Dumper(yaml.SafeDumper):  # type: ignore[misc]
        pass

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return str(yaml.dump_all(objects, Dumper=Dumper, sort_keys=False))


def write_text(document: dict[str, JSONValue], command: str, out: TextIO) -> None:
    """The document for a person: comments, then each command as one would type it."""
    import shlex

    out.write(HEADER.format(command=command))
    for target in document["targets"]:
        out.write(
            f"\n# ==== target {target['name']} ({target['kind']}, tools on {target['host']})\n"
        )
        if target.get("manifests"):
            out.write("# the objects created before the steps, in this order:\n")
            out.write(to_yaml(target["manifests"]))
            out.write("---\n")
        client = target.get("client")
        if client:
            node = (
                f"on node {client['node']}" if client["node"] else "on a node the scheduler picks"
            )
            out.write(
                f"# the client: pgbench and the round-trip probe run in {client['host']}, apart "
                f"from the server ({node}), created once the server's pod is Ready:\n"
            )
            out.write(to_yaml(client["manifests"]))
            out.write("---\n")
        for start in target["start"]:
            out.write(f"# before the steps: {start['what']}\n{shlex.join(start['argv'])}\n")
        for step in target["steps"]:
            out.write(f"\n# ---- [{step['index']}/{step['of']}] {step['label']}\n")
            if step.get("host") and step["host"] != target["host"]:
                out.write(f"# runs in {step['host']}\n")
            for inv in step["invocations"]:
                if inv.get("note"):
                    out.write(f"# {inv['note']}\n")
                for name, text in (inv.get("inputs") or {}).items():
                    out.write(f"# file {name}:\n{text}")
                    if not text.endswith("\n"):
                        out.write("\n")
                if "argv" in inv:
                    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(inv["env"].items()))
                    secret = "".join(f"{k}=*** " for k in inv.get("secret_env") or [])
                    line = " ".join(p for p in (env, secret.strip(), shlex.join(inv["argv"])) if p)
                    out.write(line + "\n")
    out.flush()
