"""The lab's containerd image stores outlive `down` (so the next `up` skips the imports); this
keeps them from growing with every rebuilt image.

Removing an old image by its name is not enough: containerd's CRI plugin gives every image a
second reference, its config digest (`sha256:...`), and that one keeps the old image's
content and snapshots alive (measured: ten rebuilt howfast images, 0.4 GB each, stayed in a
node's store after their names were removed). An image ID whose manifest no named image
has any more is such a leftover: removed, with its content (`--sync`)."""

from __future__ import annotations

from collections.abc import Sequence

from tests.k8s.lab.proc import run


def orphan_image_ids(listing: str) -> list[str]:
    """The `sha256:` references in `ctr images ls` output whose manifest digest no named
    reference shares: images whose every name was removed."""
    rows = [line.split() for line in listing.splitlines()[1:] if line.strip()]
    named = {row[2] for row in rows if len(row) >= 3 and not row[0].startswith("sha256:")}
    return [
        row[0]
        for row in rows
        if len(row) >= 3 and row[0].startswith("sha256:") and row[2] not in named
    ]


def remove_orphans(ctr: Sequence[str]) -> list[str]:
    """Remove the orphaned image IDs from one node's store (`ctr` is the command up to and
    including its namespace); the IDs removed."""
    listed = run([*ctr, "images", "ls"], check=False)
    if listed.returncode != 0:
        return []
    orphans = orphan_image_ids(listed.stdout)
    if orphans:
        run([*ctr, "images", "rm", "--sync", *orphans], check=False, timeout=120)
    return orphans
