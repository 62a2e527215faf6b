"""The lab's image-store pruning (tests/k8s/lab/image_store.py), on a node's real `ctr images ls`
output (containerd 1.6.20, Debian 12) after a day of rebuilt howfast images."""

from __future__ import annotations

from pathlib import Path

from tests.k8s.lab.image_store import orphan_image_ids

LISTING = (
    Path(__file__).resolve().parents[1] / "data" / "k8s-lab" / "ctr-images-ls-containerd-1.6.txt"
)


def test_image_ids_of_named_images_stay_and_those_of_removed_names_are_orphans() -> None:
    listing = LISTING.read_text()
    orphans = orphan_image_ids(listing)
    rows = [line.split() for line in listing.splitlines()[1:]]
    digest_of = {row[0]: row[2] for row in rows}
    named = {ref: digest for ref, digest in digest_of.items() if not ref.startswith("sha256:")}
    # every image still named keeps its ID (pgfio's, the current howfast images', ...; the
    # operator's image has none: no pod of this node had run it)
    kept = [
        ref for ref, d in digest_of.items() if ref.startswith("sha256:") and d in named.values()
    ]
    assert len(kept) == 5 and not set(kept) & set(orphans)
    # the IDs of howfast images rebuilt since (and of an older operator build) are orphans
    assert len(orphans) == 9
    assert all(
        ref.startswith("sha256:") and digest_of[ref] not in named.values() for ref in orphans
    )
    assert "sha256:7469c1e12e03daa8151a01e0ae0d315f1e97ce5a038588d4870660cc0246cd97" in orphans


def test_a_store_with_only_named_images_or_nothing_has_no_orphans() -> None:
    header = "REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
    manifest = "application/vnd.docker.distribution.manifest.v2+json"
    assert orphan_image_ids(header) == []
    assert orphan_image_ids("") == []
    one = header + (
        f"localhost/pause:3.10 {manifest} sha256:99 1.4 MiB"
        " linux/amd64 io.cri-containerd.image=managed\n"
        f"sha256:95 {manifest} sha256:99 1.4 MiB"
        " linux/amd64 io.cri-containerd.image=managed\n"
    )
    assert orphan_image_ids(one) == []
