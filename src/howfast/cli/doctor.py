"""`howfast doctor`: what was found and what each missing piece disables."""

from __future__ import annotations

import click
from rich.table import Table
from rich.text import Text

from howfast.cli.context import CliEnv, pass_env
from howfast.cli.options import check_path_value, json_option
from howfast.service.doctor import all_checks
from howfast.service.install_hints import (
    install_commands,
    missing_tools,
    this_family,
    with_install_hints,
)


@click.command("doctor")
@click.option(
    "--pg-bin",
    metavar="DIR",
    callback=check_path_value,
    help="Look for PostgreSQL programs here first; exit 1 when there are none there.",
)
@json_option
@pass_env
def doctor_command(env: CliEnv, pg_bin: str | None, as_json: bool) -> int:
    """Check PostgreSQL, pgbench, fio, cgroups, loop devices and drop_caches.

    Exits 1 when something every benchmark needs is missing.
    """
    family = this_family()
    checks = with_install_hints(all_checks(pg_bin), family)
    commands = install_commands(missing_tools(checks), family)
    missing_required = [c for c in checks if c.required and not c.ok]
    if as_json:
        env.print_json(
            {
                "ok": not missing_required,
                "store": env.store_display(),
                "checks": [c.as_dict() for c in checks],
                "install": [c.document() for c in commands],
            }
        )
    else:
        table = Table(title="howfast doctor")
        for name in ("", "what", "found", "without it, no"):
            table.add_column(name)
        for c in checks:
            mark = (
                Text("ok", "green")
                if c.ok
                else (Text("MISSING", "red") if c.required else Text("no", "yellow"))
            )
            lost = "" if c.ok else (c.disables or "") + (f"\n→ {c.hint}" if c.hint else "")
            table.add_row(mark, c.name, c.detail, lost)
        env.out.print(table)
        if commands:
            env.out.print(
                "To install what is missing (k8s:// targets need none of it: their tools run "
                "in the pod):",
                markup=False,
            )
            for command in commands:
                here = " (this machine)" if command.this_machine else ""
                note = f"\n      {command.note}" if command.note else ""
                env.out.print(f"  {command.name}{here}:\n    {command.command}{note}", markup=False)
        env.out.print(f"results store: {env.store_display()}", markup=False)
    return 1 if missing_required else 0
