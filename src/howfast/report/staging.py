"""Writing a report so that it is whole or not there: its document and chart images go to
temporary names in the destination's own directory, then are renamed into place, the images
first and the document last. A rename needs no room, so a full disk, a quota or a Ctrl-C
leaves the earlier report of the same name as it was, and no truncated file or empty image.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

IMAGE_GLOB = "chart-*.png"  # what a report writes in its images directory


class Staging:
    """The temporary files of one report; `commit` puts them in place."""

    def __init__(self, document: Path) -> None:
        # Through a symbolic link, the file it points to is replaced, and the link stays.
        self.document = document.resolve() if document.is_symlink() else document
        self.directory = self.document.parent
        # A report written again keeps the earlier one's permissions.
        self.mode = self.document.stat().st_mode & 0o777 if self.document.exists() else 0o644
        self._file: Path | None = None
        self._images: Path | None = None
        self._images_target: Path | None = None

    def images_dir(self, target: Path) -> Path:
        """A temporary directory for the images that go to `target`."""
        if self._images is None:
            self._images = Path(
                tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=self.directory)
            )
            self._images_target = target
        return self._images

    def write_document(self, text: str) -> None:
        fd, name = tempfile.mkstemp(
            prefix=f".{self.document.name}.", suffix=".tmp", dir=self.directory
        )
        self._file = Path(name)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(self._file, self.mode)  # mkstemp's 0600 is not what a written file gets

    def commit(self) -> None:
        """The images, then the document. An earlier report's images that this one does not
        have are removed; other files in the images directory are left alone."""
        if self._images is not None and self._images_target is not None:
            target = self._images_target
            os.chmod(self._images, 0o755)
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
            os.replace(self._file, self.document)
            self._file = None

    def discard(self) -> None:
        if self._file is not None:
            self._file.unlink(missing_ok=True)
        if self._images is not None:
            shutil.rmtree(self._images, ignore_errors=True)


@contextlib.contextmanager
def staged(document: Path) -> Iterator[Staging]:
    """Temporary files for a report to `document`, committed when the block ends, removed
    whatever stops it."""
    staging = Staging(document)
    try:
        yield staging
        staging.commit()
    finally:
        staging.discard()
