"""Writing a report so that it is whole or not there: its document and chart images go to
temporary names in the destination's own directory, then are renamed into place, the images
first and the document last. A rename needs no room, so a full disk, a quota or a Ctrl-C
leaves the earlier report of the same name as it was, and no truncated file or empty image.
The document follows the rule of every file howfast writes (outfile.py): a regular file or a
new name, through a link only to a regular file, its mode and owner kept.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from howfast.errors import UsageError
from howfast.outfile import OutputFile, Replacement, create_temp_dir, kind_of

IMAGE_GLOB = "chart-*.png"  # what a report writes in its images directory


class Staging:
    """The temporary files of one report; `commit` puts them in place."""

    def __init__(self, document: OutputFile) -> None:
        self.document = document
        self.directory = document.path.parent if str(document.path.parent) else Path(".")
        self._file: Replacement | None = None
        self._images: Path | None = None
        self._images_target: Path | None = None

    def images_dir(self, target: Path) -> Path:
        """A temporary directory for the images that go to `target`; UsageError when
        `target`, or an image of an earlier report in it, is not what a report writes."""
        if self._images is None:
            check_images_dir(target)
            self._images = create_temp_dir(self.directory, target.name)
            self._images_target = target
        return self._images

    def write_document(self, text: str) -> None:
        self._file = Replacement(self.document)
        self._file.file.write(text)

    def commit(self) -> None:
        """The images, then the document. An earlier report's images that this one does not
        have are removed; other files in the images directory are left alone."""
        if self._file is not None:
            self._file.finish()  # a document that cannot be whole fails before images move
        if self._images is not None and self._images_target is not None:
            target = self._images_target
            if not target.exists():
                os.replace(self._images, target)
            else:
                new = {p.name for p in self._images.iterdir()}
                for image in self._images.iterdir():
                    os.replace(image, target / image.name)
                for old in target.glob(IMAGE_GLOB):
                    if old.name not in new:
                        old.unlink()
                self._images.rmdir()
            self._images = None
        if self._file is not None:
            self._file.put_in_place()
            self._file = None

    def discard(self) -> None:
        if self._file is not None:
            self._file.discard()
        if self._images is not None:
            shutil.rmtree(self._images, ignore_errors=True)


def check_images_dir(target: Path) -> None:
    """The charts' directory is a directory (or a link to one) or a new name, and the images
    of an earlier report in it are regular files: they are replaced or removed."""
    try:
        found = os.stat(target)
    except FileNotFoundError:
        if os.path.islink(target):
            raise UsageError(
                f"{target}: a symbolic link to {os.readlink(target)}, which does not exist; "
                "the report's charts go in this directory"
            ) from None
        return
    if not stat.S_ISDIR(found.st_mode):
        raise UsageError(
            f"{target}: is {kind_of(found.st_mode)}; the report's charts go in this directory",
            hint="move it away or name the report otherwise",
        )
    for image in target.glob(IMAGE_GLOB):
        mode = os.lstat(image).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(
                f"{image}: is {kind_of(mode)}; a report replaces the {IMAGE_GLOB} in {target}",
                hint="move it away or name the report otherwise",
            )


@contextlib.contextmanager
def staged(document: OutputFile) -> Iterator[Staging]:
    """Temporary files for a report to `document`, committed when the block ends, removed
    whatever stops it."""
    staging = Staging(document)
    try:
        yield staging
        staging.commit()
    finally:
        staging.discard()
