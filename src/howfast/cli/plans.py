"""`howfast plans [NAME]`: list the built-in plans, or print one as a starting point."""

from __future__ import annotations

import click
from rich.table import Table

from howfast.cli.context import CliEnv, pass_env
from howfast.plans import builtin_plan_text, list_builtin_plans


@click.command("plans")
@click.argument("name", required=False)
@pass_env
def plans_command(env: CliEnv, name: str | None) -> int:
    """List built-in plans; with NAME, print that plan's TOML.

    \b
    Make your own plan from one:
      howfast plans quick > my-plan.toml   # edit it, then
      howfast run my-plan.toml --target DIR
    """
    if name:
        env.stdout.write(builtin_plan_text(name))
        return 0
    table = Table(title="built-in plans")
    table.add_column("name")
    table.add_column("what it measures")
    for plan_name, description in list_builtin_plans():
        table.add_row(plan_name, description)
    env.out.print(table)
    env.info("print one with `howfast plans NAME`; run it with `howfast run NAME --target DIR`")
    return 0
