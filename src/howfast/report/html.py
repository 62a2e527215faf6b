"""The HTML report: one self-contained file that works offline.

Tables are plain HTML, readable without JavaScript. Charts are drawn by plotly.js, taken from
the installed plotly package and embedded in the page gzip-compressed (base64), with the chart
data beside it: the page makes no request to any other host, and stays small enough to mail
(plotly.min.js alone is 4.8 MB; compressed it is under 2 MB). The browser inflates both with
DecompressionStream, then draws each chart when it comes near the screen, so that a report of
many runs opens at once. The page records what went wrong in `window.__howfastErrors` and
marks each drawn chart `data-state="drawn"`, which the tests read in a headless browser.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
from datetime import UTC, datetime
from importlib import resources

from howfast import __version__
from howfast.report.charts import Chart
from howfast.report.charts_plotly import figure
from howfast.report.outline import ReportDocument, Section
from howfast.report.tables import Cell, Table

PLOTLY_JS = ("plotly", "package_data", "plotly.min.js")
FOLDED_NOTES = 6  # more notes under a table than this are folded (a link to one unfolds it)

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f;
       margin: 0 auto; padding: 1rem 2rem 4rem; max-width: 1400px; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { font-size: 1.3rem; margin-top: 2.4rem; border-bottom: 1px solid #ddd; }
.subtitle, .generated { color: #555; margin: .2rem 0; }
nav ul { padding-left: 1.2rem; columns: 3; }
.table-wrap { overflow-x: auto; margin: 1rem 0; }
table { border-collapse: collapse; font-size: 13px; }
caption { text-align: left; font-weight: 600; padding: .3rem 0; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; vertical-align: top; }
th { background: #f4f4f6; text-align: left; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
sup.note a { color: #b35900; text-decoration: none; font-weight: 600; margin-left: .15rem; }
ol.notes { font-size: 13px; color: #8a4500; margin-top: .2rem; }
details summary { font-size: 13px; color: #8a4500; cursor: pointer; }
figure.chart { margin: 1rem 0; border: 1px solid #eee; }
.plot { min-height: 380px; }
.plot:empty::before { content: "chart loading…"; color: #888; display: block; padding: 1rem; }
p.warning { color: #8a4500; }
"""

SCRIPT = """
(function () {
  "use strict";
  var errors = window.__howfastErrors = [];
  var state = window.__howfast = {total: 0, drawn: 0, failed: 0, ready: false};
  window.addEventListener("error", function (e) { errors.push(String(e.message || e)); });
  window.addEventListener("unhandledrejection", function (e) { errors.push(String(e.reason)); });
  function explain(text) {
    document.querySelectorAll(".plot").forEach(function (el) {
      if (!el.dataset.state) { el.textContent = text; }
    });
  }
  async function inflate(id) {
    var text = document.getElementById(id).textContent.trim();
    var bytes = Uint8Array.from(atob(text), function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }
  async function start() {
    if (!("DecompressionStream" in window)) {
      explain("This browser cannot unpack the charts (it is older than 2023); "
              + "every figure is in the tables.");
      return;
    }
    var library = document.createElement("script");
    library.textContent = await inflate("howfast-plotly");
    document.head.appendChild(library);
    var figures = JSON.parse(await inflate("howfast-charts"));
    var plots = Array.from(document.querySelectorAll(".plot"));
    state.total = plots.length;
    function draw(el) {
      if (el.dataset.state) { return Promise.resolve(); }
      el.dataset.state = "drawing";
      var fig = figures[el.id];
      var config = {responsive: true, displaylogo: false};
      return Plotly.newPlot(el, fig.data, fig.layout, config).then(function () {
        el.dataset.state = "drawn"; state.drawn += 1;
      }, function (err) {
        el.dataset.state = "failed"; state.failed += 1; errors.push(String(err));
      });
    }
    state.drawAll = function () { return Promise.all(plots.map(draw)); };
    // Charts are drawn as they come near the screen: a report of many runs has hundreds.
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (entry.isIntersecting) { observer.unobserve(entry.target); draw(entry.target); }
      });
    }, {rootMargin: "800px 0px"});
    plots.forEach(function (el) { observer.observe(el); });
    state.ready = true;
  }
  start().catch(function (err) {
    errors.push(String(err));
    explain("The charts could not be drawn; every figure is in the tables.");
  });
})();
"""


@functools.cache
def _packed_plotly() -> str:
    """plotly.min.js from the installed plotly package, gzip-compressed, in base64."""
    path = resources.files(PLOTLY_JS[0]).joinpath(*PLOTLY_JS[1:])
    return _pack(path.read_bytes())


def _pack(data: bytes) -> str:
    return base64.b64encode(gzip.compress(data, compresslevel=6, mtime=0)).decode("ascii")


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _cell(cell: Cell, table_id: str, notes: list[str], header: bool = False) -> str:
    tag = "th" if header else "td"
    css = ' class="num"' if cell.numeric else ""
    marks = "".join(
        f'<sup class="note"><a href="#{table_id}-n{n}" title="{_e(notes[n - 1])}">[{n}]</a></sup>'
        for n in cell.notes
    )
    return f"<{tag}{css}>{_e(cell.text)}{marks}</{tag}>"


def render_table(table: Table, table_id: str) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in table.columns)
    body = "\n".join(
        "<tr>" + "".join(_cell(c, table_id, table.notes) for c in row) + "</tr>"
        for row in table.rows
    )
    parts = [
        f'<div class="table-wrap"><table id="{table_id}">',
        f"<caption>{_e(table.title)}</caption>",
        f"<thead><tr>{head}</tr></thead>",
        f"<tbody>\n{body}\n</tbody></table></div>",
    ]
    if table.notes:
        items = "".join(
            f'<li id="{table_id}-n{n}">{_e(text)}</li>'
            for n, text in enumerate(table.notes, start=1)
        )
        notes = f'<ol class="notes">{items}</ol>'
        if len(table.notes) > FOLDED_NOTES:  # a long list would push the charts off screen
            notes = f"<details><summary>{len(table.notes)} notes</summary>{notes}</details>"
        parts.append(notes)
    return "\n".join(parts)


def render_chart(chart: Chart) -> str:
    return (
        f'<figure class="chart"><div class="plot" id="{chart.id}" role="img" '
        f'aria-label="{_e(chart.title)}"></div></figure>'
    )


def _section(section: Section) -> str:
    parts = [f'<section id="{_e(section.id)}"><h{section.level}>{_e(section.title)}'
             f"</h{section.level}>"]  # fmt: skip
    for index, block in enumerate(section.blocks):
        if isinstance(block, Table):
            parts.append(render_table(block, f"{section.id}-{block.id}-{index}"))
        elif isinstance(block, Chart):
            parts.append(render_chart(block))
        else:
            css = ' class="warning"' if block.startswith("Warning:") else ""
            parts.append(f"<p{css}>{_e(block)}</p>")
    parts.append("</section>")
    return "\n".join(parts)


def render(document: ReportDocument, generated_at: str | None = None) -> str:
    """The whole page as one string."""
    generated = generated_at or datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    charts = document.charts()
    figures = {c.id: figure(c) for c in charts}
    packed_charts = _pack(json.dumps(figures, separators=(",", ":")).encode())
    toc = "".join(f'<li><a href="#{_e(s.id)}">{_e(s.title)}</a></li>' for s in document.sections)
    body = "\n".join(_section(s) for s in document.sections)
    scripts = ""
    if charts:
        scripts = (
            f'<script type="application/octet-stream" id="howfast-plotly">'
            f"{_packed_plotly()}</script>\n"
            f'<script type="application/octet-stream" id="howfast-charts">'
            f"{packed_charts}</script>\n"
            f"<script>{SCRIPT}</script>"
        )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="howfast {_e(__version__)}">
<title>{_e(document.title)}</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>{_e(document.title)}</h1>
<p class="subtitle">{_e(document.subtitle)}</p>
<p class="generated">generated {_e(generated)} by howfast {_e(__version__)}</p>
<noscript><p>The charts need JavaScript; every figure is also in the tables.</p></noscript>
</header>
<nav><ul>{toc}</ul></nav>
<main>
{body}
</main>
{scripts}
</body>
</html>
"""
