"""(issue 37) Each instance's own metrics endpoint (CloudNativePG's exporter, port 9187,
`/metrics`) read as a Prometheus source at the step's start and end, through a
port-forward to the instance's pod (HasInstances.metrics_text): the counters its `cnpg_`
families moved by during the step, per instance, in `postgres.instance_metrics.<name>`.
An endpoint that does not answer is said once and left out; nothing stops a step.
The parser is prometheus_client's; which families the exporter has is its own business
(its default queries, and the user's), so every counter is taken, by its name and labels."""

from __future__ import annotations

from collections.abc import Mapping

from howfast.model import JSONValue
from howfast.samplers.base import Sampler, SamplerContext, SamplerResult
from howfast.samplers.plugin import SamplerPlugin, SamplerSetup
from howfast.targets.capabilities import HasInstances

PREFIX = "cnpg_"
MAX_SERIES = 200  # per instance: the exporter's queries may be many


def counter_values(text: str) -> dict[str, float]:
    """`name{label="v",...}` -> value of every counter sample of the `cnpg_` families, named
    as prometheus_client's parser names them (a counter's sample ends in `_total`; its
    `_created` samples are left out). Pure."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(PREFIX) or family.type != "counter":
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return out


def moved(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, JSONValue]:
    """The counters that moved, by how much (a counter reset, or a new pod: left out)."""
    out: dict[str, JSONValue] = {}
    for key in sorted(after):
        if key in before and after[key] > before[key]:
            out[key] = round(after[key] - before[key], 6)
        if len(out) >= MAX_SERIES:
            break
    return out


class InstanceMetricsSampler(Sampler):
    name = "instance-metrics"

    def __init__(self, target: HasInstances) -> None:
        self.target = target
        self.first: dict[str, dict[str, float]] = {}
        self.problems: dict[str, str] = {}

    def _read(self) -> dict[str, dict[str, float]]:
        readings = {}
        for view in self.target.instance_views():
            try:
                text = self.target.metrics_text(view.name)
            except Exception as exc:  # the endpoint, the forward: said, never raised
                self.problems[view.name] = str(exc)
                continue
            if text is None:
                self.problems.setdefault(view.name, "no metrics endpoint (port 9187)")
                continue
            try:
                readings[view.name] = counter_values(text)
            except ValueError as exc:
                self.problems[view.name] = f"not Prometheus text: {exc}"
        return readings

    def start(self, ctx: SamplerContext) -> None:
        del ctx
        try:
            self.first = self._read()
        except Exception as exc:
            self.problems["*"] = str(exc)

    def stop(self) -> SamplerResult:
        out = SamplerResult()
        try:
            last = self._read()
        except Exception as exc:
            self.problems["*"] = str(exc)
            last = {}
        section: dict[str, JSONValue] = {
            name: {
                "source": "the instance's /metrics (port 9187)",
                "counters": moved(self.first[name], counters),
            }
            for name, counters in sorted(last.items())
            if name in self.first
        }
        out.sections["postgres"] = {"instance_metrics": section}
        out.warnings += [f"instance metrics of {n}: {p}" for n, p in sorted(self.problems.items())]
        return out


def _create(setup: SamplerSetup) -> Sampler | None:
    target = setup.target
    return InstanceMetricsSampler(target) if isinstance(target, HasInstances) else None


SAMPLER = SamplerPlugin("instance-metrics", _create, order=45, sections=("postgres",))
