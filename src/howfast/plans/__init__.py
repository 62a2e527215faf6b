"""Plans: declarative TOML files that expand into the steps of a run.

    plan = load_plan("quick")                       # or a path to a .toml file
    steps = expand(plan, Overrides(clients=[1, 4]))
    settings = effective_settings(plan, overrides)  # postgresql.conf for clusters howfast creates

See docs/plans/format.md for the file format and the params of each step, and
docs/architecture.md for where each workload's step model and expansion live.
"""

from howfast.plans.expand import effective_settings, expand
from howfast.plans.load import (
    builtin_plan_names,
    builtin_plan_text,
    key_lines,
    list_builtin_plans,
    load_plan,
    parse_plan,
)
from howfast.plans.model import Plan, Step, parse_int_list, parse_set_option
from howfast.plugin.overrides import Overrides

__all__ = [
    "Overrides",
    "Plan",
    "Step",
    "builtin_plan_names",
    "builtin_plan_text",
    "effective_settings",
    "expand",
    "key_lines",
    "list_builtin_plans",
    "load_plan",
    "parse_int_list",
    "parse_plan",
    "parse_set_option",
]
