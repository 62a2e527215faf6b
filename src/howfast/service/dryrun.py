"""`--dry-run`: every invocation a run would make, built by the same functions that build the
ones that run, printed instead of run. Nothing is created: no directory, cluster or file.

What only the run can decide (a socket directory's random suffix, a free port, a scale chosen
from a measurement, a rate taken from a measured maximum) is an upper-case placeholder, and
the step's note says where it comes from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from howfast.machine.pgbin import PgInstall
from howfast.model import JSONValue, StepSpec
from howfast.targets.base import Target
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
        host = target.host(install)
        ctx = PlanContext(
            target=target,
            connection=target.planned_connection(),
            install=install,
            host=host,
            scratch_dir=target.planned_scratch_dir(),
        )
        planned_commands: list[tuple[str, list[str]]] = getattr(
            target, "planned_commands", lambda: []
        )()
        entries: list[JSONValue] = []
        for offset, spec in enumerate(steps):
            workload = get_workload(spec.workload)
            invocations = [
                {**(p.invocation.document() if p.invocation else {}), "note": p.note}
                for p in workload.planned(ctx, dict(spec.params))
            ]
            entry: dict[str, JSONValue] = {
                "index": position * len(steps) + offset + 1,
                "of": total,
                "workload": spec.workload,
                "label": workload.label(spec.params),
                "params": dict(spec.params),
                "invocations": invocations,
            }
            entries.append(entry)
        out.append(
            {
                "name": target.name,
                "kind": target.kind,
                "host": host.name,
                "start": [{"what": what, "argv": argv} for what, argv in planned_commands],
                # Kubernetes targets: every object start() creates, in order
                "manifests": getattr(target, "planned_manifests", lambda: [])(),
                "steps": entries,
            }
        )
    return {"dry_run": True, "targets": out}


def write_text(document: dict[str, JSONValue], command: str, out: TextIO) -> None:
    """The document for a person: comments, then each command as one would type it."""
    import shlex

    out.write(HEADER.format(command=command))
    for target in document["targets"]:
        out.write(
            f"\n# ==== target {target['name']} ({target['kind']}, tools on {target['host']})\n"
        )
        if target.get("manifests"):
            from howfast.targets.k8s.manifests import to_yaml

            out.write("# the objects created before the steps, in this order:\n")
            out.write(to_yaml(target["manifests"]))
            out.write("---\n")
        for start in target["start"]:
            out.write(f"# before the steps: {start['what']}\n{shlex.join(start['argv'])}\n")
        for step in target["steps"]:
            out.write(f"\n# ---- [{step['index']}/{step['of']}] {step['label']}\n")
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
