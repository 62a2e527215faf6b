"""The Markdown report: the same tables as the HTML report, and its charts as PNG images in a
directory beside the document (`storage.md` → `storage-charts/chart-1.png`)."""

from __future__ import annotations

from pathlib import Path

from howfast.report.charts import Chart
from howfast.report.charts_png import render_png
from howfast.report.outline import ReportDocument
from howfast.report.tables import Cell, Table


def charts_dir(document_path: Path) -> Path:
    return document_path.with_name(f"{document_path.stem}-charts")


def _escape(text: str) -> str:
    """Cell text that cannot break a Markdown table."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _cell(cell: Cell) -> str:
    return _escape(cell.text) + "".join(f" [{n}]" for n in cell.notes)


def render_table(table: Table) -> str:
    align = ["---:" if any(r[i].numeric for r in table.rows if i < len(r)) else "---"
             for i in range(len(table.columns))]  # fmt: skip
    lines = [
        f"**{_escape(table.title)}**",
        "",
        "| " + " | ".join(_escape(c) for c in table.columns) + " |",
        "| " + " | ".join(align) + " |",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    if table.notes:
        lines.append("")
        lines += [f"[{n}] {_escape(text)}  " for n, text in enumerate(table.notes, start=1)]
    return "\n".join(lines)


def render(
    document: ReportDocument, path: Path, generated_at: str, images: Path | None = None
) -> str:
    """The Markdown text; writes the chart images into `images` on the way (by default
    charts_dir(path), the directory its links name)."""
    linked = charts_dir(path)
    images = images or linked
    charts = document.charts()
    if charts:
        images.mkdir(parents=True, exist_ok=True)
    parts = [f"# {document.title}", "", document.subtitle, "", f"_generated {generated_at}_", ""]
    for section in document.sections:
        parts += [f"{'#' * section.level} {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                parts += [render_table(block), ""]
            elif isinstance(block, Chart):
                image = images / f"{block.id}.png"
                render_png(block, image)
                parts += [f"![{_escape(block.title)}]({linked.name}/{image.name})", ""]
            else:
                parts += [f"> {block}" if block.startswith("Warning:") else block, ""]
    return "\n".join(parts)
