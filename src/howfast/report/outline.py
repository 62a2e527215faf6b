"""The outline of an HTML or Markdown report: sections holding tables, charts and short
paragraphs. document.py builds it (with the workloads' report parts, report/hooks.py);
html.py and markdown.py render it."""

from __future__ import annotations

from dataclasses import dataclass, field

from howfast.report.charts import Chart
from howfast.report.tables import Table

Block = Table | Chart | str


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2


@dataclass
class ReportDocument:
    title: str
    subtitle: str
    sections: list[Section]

    def charts(self) -> list[Chart]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Chart)]
