"""Writing a report file: HTML or Markdown by the file's suffix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from howfast.analysis import steady
from howfast.analysis.groups import count_tests
from howfast.analysis.overview import overview
from howfast.errors import UsageError
from howfast.model import RunRecord
from howfast.outfile import OutputFile, output_file
from howfast.plugin.registry import plugins
from howfast.report import document, html
from howfast.report.charts import DEFAULT_ROLES, MAX_PER_SECOND_TESTS, io_series_names
from howfast.report.staging import staged

HTML_SUFFIXES = (".html", ".htm")
MARKDOWN_SUFFIXES = (".md", ".markdown")


def series_to_read(runs: Sequence[RunRecord]) -> list[str]:
    """The series the report of these runs (read without series) uses; the rest of what
    the samplers stored is not read. Disk I/O only when the per-second charts are drawn."""
    names = list(steady.SERIES)  # the steady-state figures come from them
    # The per-second charts are of the tests whose TPS has a steady state (pgbench's).
    steady_workloads = [name for name, p in plugins().items() if p.steady_series]
    tests = sum(count_tests(r, w) for r in runs for w in steady_workloads)
    if tests <= MAX_PER_SECOND_TESTS:
        roles = {
            role
            for r in runs
            for s in r.steps
            if isinstance(io := s.sections.get("io"), dict) and isinstance(io.get("roles"), dict)
            for role in io["roles"]
        }
        names += io_series_names(sorted(roles) or DEFAULT_ROLES)
    return names


@dataclass(frozen=True)
class Written:
    path: Path
    size_bytes: int
    charts: int
    images_dir: Path | None = None


FORMATS = ("html", "markdown")


def report_format(path: Path | None, chosen: str | None = None) -> str:
    """The format of a report to `path` (None: standard output): `chosen` (--format), else
    the file's suffix; UsageError when neither tells, when they disagree, or for Markdown
    on standard output (its charts are files beside it)."""
    by_suffix = _format_of_suffix(path) if path is not None else None
    if path is None:
        if chosen == "markdown":
            raise UsageError(
                "-o - with --format markdown: a Markdown report's charts are PNG files "
                "written beside it, which standard output cannot hold",
                hint="give a file name (FILE.md), or --format html for standard output",
            )
        if chosen is None:
            raise UsageError(
                "-o -: standard output has no suffix to tell the report format",
                hint="add --format html, for one self-contained page",
            )
        return chosen
    if chosen is not None:
        if by_suffix is not None and by_suffix != chosen:
            raise UsageError(
                f"{path}: the suffix {path.suffix} is {by_suffix}, but --format says {chosen}",
                hint="drop --format, or name the file for that format",
            )
        return chosen
    if by_suffix is None:
        raise UsageError(
            f"{path}: cannot tell the report format from {path.suffix or 'no suffix'}",
            hint="name the file .html (one self-contained page) or .md (Markdown with PNG "
            "charts), or give --format",
        )
    return by_suffix


def _format_of_suffix(path: Path) -> str | None:
    suffix = path.suffix.lower()
    if suffix in HTML_SUFFIXES:
        return "html"
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    return None


def html_report(runs: Sequence[RunRecord], generated_at: str | None = None) -> str:
    """The HTML report of `runs` as text (for standard output)."""
    return html.render(document.build(overview(runs)), generated_at or _now())


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def write_report(
    runs: Sequence[RunRecord],
    out: OutputFile | Path,
    generated_at: str | None = None,
    fmt: str | None = None,
) -> Written:
    """The report of `runs` in `out` (checked by outfile.py's rule; a Path is checked here),
    in format `fmt` (default: by the suffix), whole or not at all (report/staging.py): on an
    error nothing is left half-written and an earlier report of that name is unchanged."""
    if isinstance(out, Path):
        out = output_file(str(out))
    path = out.given
    kind = report_format(path, fmt)
    generated = generated_at or _now()
    outline = document.build(overview(runs))
    images = None
    try:
        with staged(out) as staging:
            if kind == "html":
                text = html.render(outline, generated)
            else:
                # Imported here: matplotlib takes seconds to load, and only Markdown needs it.
                from howfast.report import markdown

                if outline.charts():
                    images = markdown.charts_dir(path)
                    text = markdown.render(outline, path, generated, staging.images_dir(images))
                else:
                    text = markdown.render(outline, path, generated)
            staging.write_document(text)
    except OSError as exc:
        raise UsageError(
            f"{path}: cannot write the report: {exc.strerror or exc}",
            _nothing_written(path, images),
        ) from None
    return Written(path, path.stat().st_size, len(outline.charts()), images)


def _nothing_written(path: Path, images: Path | None) -> str:
    earlier = [
        text
        for text, there in (
            (f"the earlier {path.name}", path.exists()),
            (f"its charts in {images.name}/" if images else "", images and images.exists()),
        )
        if there
    ]
    if not earlier:
        return "nothing was written"
    verb = "are" if len(earlier) > 1 else "is"
    return f"nothing was written: {' and '.join(earlier)} {verb} unchanged"
