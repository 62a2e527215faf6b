"""The shared memory of a server this howfast process killed (a failover, a crash), removed
by the run itself once the postmaster that tidied its data directory has stopped.

That postmaster removes the killed server's System V segment (and, through it, its dynamic
shared memory) only when the segment sits at the first key it probes: the data directory's
inode number. A server that got another key at its start (that one was held by another
server's segment, or a leftover) left its segment where the tidying postmaster never looks,
and it stayed. So what the registry recorded for the servers on that data directory (their
segment's id, key and creator, their /dev/shm/PostgreSQL.* files) is removed here with the
remover's own checks (remove.py): a segment only while its id still has that key and creator
and nothing is attached, anything only once no process is left in the data directory. What
cannot be removed stays recorded, for `howfast cleanup`.
"""

from __future__ import annotations

from pathlib import Path

from howfast.errors import HowfastError
from howfast.targets.leftovers import registry


def free_killed_memory(data_dir: Path) -> str | None:
    """Remove what is still there of the shared memory recorded for this process's servers on
    `data_dir`, all of them gone; None when nothing is left, else a warning saying what is
    left and why (`howfast cleanup` removes it later)."""
    # Imported here: every command that makes a local target imports this module, and only a
    # crash or a failover needs the finder (a machine snapshot's eleven record types).
    from howfast.targets.leftovers.find import segment_action, segment_name
    from howfast.targets.leftovers.remove import ACTIONS

    problems = []
    for item in registry.server_memory(data_dir):
        action = segment_action(item)
        try:
            ACTIONS[action.op](action)
        except HowfastError as exc:
            problems.append(f"{segment_name(item)}: {exc}")
    if not problems:
        return None
    return (
        f"the shared memory of the killed server on {data_dir} is left ({'; '.join(problems)}); "
        "`howfast cleanup` removes it once nothing uses it"
    )
