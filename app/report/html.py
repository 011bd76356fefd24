"""The HTML report: one self-contained file that works offline.

plotly.js is inlined once, gzipped and base64-encoded, and unpacked in the browser by its
``DecompressionStream``: the cartesian bundle (scatter, bar, heatmap: every trace a report
draws) vendored in ``vendor/`` takes about 660 KB that way, where the full bundle of the
plotly package took 4.8 MB as plain text. Each chart is its figure's JSON plus a
``Plotly.newPlot`` call; the CSS is inline. No CDN, no web font, no image: opening the file
makes no network request (``tests/report/test_html_browser.py`` checks it in Chromium).

Example::

    from stateglass.app.report.html import render
    from stateglass.app.report.model import load_report
    text = render(load_report(db, "/data/checkpoints/orders"))
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from functools import lru_cache
from importlib import resources
from typing import Any

import pandas as pd

from stateglass.app.report.charts import ChartGroup, chart_groups
from stateglass.app.report.model import (
    FindingLike,
    ReportData,
    StoreData,
    finding_groups,
    finding_scope,
    fmt_int,
)
from stateglass.parsers.units import UNKNOWN, fmt_bytes

PLOT_CONFIG = {"responsive": True, "displaylogo": False, "scrollZoom": False}

CSS = """
:root { --ok: #2e7d32; --warn: #b26a00; --err: #c62828; --muted: #5f6b7a; --line: #dde3ea; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica,
       Arial, sans-serif; color: #1d2733; background: #f6f8fa; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 10px; padding-top: 8px; border-top: 2px solid var(--line); }
h3 { font-size: 16px; margin: 22px 0 6px; }
code, .mono { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.muted { color: var(--muted); }
.path { word-break: break-all; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 16px; }
th, td { text-align: left; vertical-align: top; padding: 6px 10px;
         border-bottom: 1px solid var(--line); }
th { background: #f0f3f6; font-weight: 600; }
/* Schemas are long strings without spaces: let them wrap instead of widening the page. */
td { overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nowrap { white-space: nowrap; overflow-wrap: normal; }
td.check { width: 210px; }
table.kv th { width: 34%; background: none; font-weight: normal; color: var(--muted); }
.badge { display: inline-block; min-width: 46px; padding: 1px 8px; border-radius: 10px;
         color: #fff; font-weight: 700; font-size: 12px; text-align: center; }
.badge.OK { background: var(--ok); } .badge.WARN { background: var(--warn); }
.badge.ERR { background: var(--err); } .badge.SKIP { background: var(--muted); }
.verdict { margin: 16px 0; padding: 12px 16px; border-radius: 6px; font-size: 17px;
           border-left: 6px solid; background: #f6f8fa; }
.verdict.OK { border-color: var(--ok); } .verdict.WARN { border-color: var(--warn); }
.verdict.ERR { border-color: var(--err); }
.hint { color: var(--muted); font-size: 13px; margin-top: 2px; }
nav ol { columns: 2; margin: 6px 0; padding-left: 20px; }
nav a { color: #1f5fa8; text-decoration: none; }
figure { margin: 10px 0 22px; break-inside: avoid; page-break-inside: avoid; }
.chart { width: 100%; min-height: 120px; }
figcaption { color: var(--muted); font-size: 13px; margin: 2px 0 0 4px; }
.note { background: #fff8e1; border: 1px solid #f0dca0; padding: 6px 10px; border-radius: 4px;
        font-size: 13px; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
@page { size: A4 landscape; margin: 10mm; }
@media print {
  body { background: #fff; }
  main { max-width: none; padding: 0; }
  nav, .modebar-container { display: none !important; }
  h2 { break-before: auto; break-after: avoid; }
}
"""

# Unpack plotly.js, then render the charts; a console error names a chart that failed. A
# browser without DecompressionStream (before 2023) says so in the page instead of failing quietly.
BOOT = """
(function () {
  function draw() {
    var specs = JSON.parse(document.getElementById("sg-figures").textContent);
    var templates = JSON.parse(document.getElementById("sg-templates").textContent);
    var config = JSON.parse(document.getElementById("sg-config").textContent);
    var pending = specs.map(function (s) {
      var el = document.getElementById(s.id);
      var layout = s.figure.layout || {};
      if (s.template !== null) layout.template = templates[s.template];
      return Plotly.newPlot(el, s.figure.data, layout, config);
    });
    return Promise.all(pending).then(function () {
      document.body.setAttribute("data-charts-rendered", String(specs.length));
    });
  }
  if (typeof DecompressionStream === "undefined") {
    document.getElementById("sg-no-charts").hidden = false;
    return;
  }
  var packed = atob(document.getElementById("sg-plotly").textContent);
  var bytes = new Uint8Array(packed.length);
  for (var i = 0; i < packed.length; i++) bytes[i] = packed.charCodeAt(i);
  var unpacked = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  new Response(unpacked).text().then(function (code) {
    var script = document.createElement("script");
    script.textContent = code;
    document.head.appendChild(script);
    return draw();
  });
})();
"""

# The bundle a report inlines, and the plotly.js release it is (its first comment names it).
PLOTLY_BUNDLE = "plotly-cartesian.min.js"
PLOTLY_BUNDLE_VERSION = "4.1.1"


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The plotly.js a report inlines, as source text, read once.

    The vendored cartesian bundle when it is the release the installed plotly package draws
    for; else that package's own full bundle (about 4.6 MB), which always matches its figures.
    """
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    if get_plotlyjs_version() == PLOTLY_BUNDLE_VERSION:
        return (resources.files("stateglass.app.report") / "vendor" / PLOTLY_BUNDLE).read_text(
            "utf-8"
        )
    return str(get_plotlyjs())


@lru_cache(maxsize=1)
def packed_plotly_js() -> str:
    """:func:`plotly_js` gzipped and base64-encoded, as the page unpacks it."""
    raw = plotly_js().encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def script_json(value: str) -> str:
    """JSON text made safe inside ``<script>``: no ``</script>`` or ``<!--`` can close it.

    Parentheses only occur inside JSON strings, so writing them ``\\u0028``/``\\u0029``
    changes nothing JSON.parse returns, while key values on the charts (growth
    attribution) never read like a call in the page's source.
    """
    return (
        value.replace("</", "<\\/")
        .replace("<!--", "<\\u0021--")
        .replace("(", "\\u0028")
        .replace(")", "\\u0029")
    )


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _table(header: list[str], rows: list[list[str]], classes: dict[int, str] | None = None) -> str:
    """An HTML table; cells are already escaped HTML; ``classes`` maps a column to its class."""
    classes = classes or {}
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{classes[i]}">{c}</td>' if i in classes else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _finding_row(f: FindingLike, hint: bool) -> list[str]:
    return [
        f'<span class="badge {_e(f.status)}">{_e(f.status)}</span>',
        f"{_e(f.title)}<div class='hint'>{_e(finding_scope(f))}</div>"
        f"<div class='hint mono'>{_e(f.rule)}</div>",
        _e(f.finding) + (f'<div class="hint">What to do: {_e(f.hint)}</div>' if hint else ""),
    ]


def _scoped(f: FindingLike) -> str:
    scope = finding_scope(f)
    return f"{scope}: {f.finding}" if scope else f.finding


def _health(data: ReportData) -> str:
    if not data.findings:
        return '<p class="muted">No health findings.</p>'
    rows = []
    for group in finding_groups(data.findings):
        # One hint per group: a rule tripping on many partitions says the same thing each time.
        hints = {f.hint for f in group.shown}
        rows += [
            _finding_row(
                f, f.status not in ("OK", "SKIP") and bool(f.hint) and (len(hints) > 1 or i == 0)
            )
            for i, f in enumerate(group.shown)
        ]
        if group.folded:
            first = group.folded[0]
            items = "".join(f"<li>{_e(_scoped(f))}</li>" for f in group.folded)
            rows.append(
                [
                    f'<span class="badge {_e(first.status)}">{_e(first.status)}</span>',
                    _e(first.title),
                    f"<details><summary>{len(group.folded)} more like these</summary>"
                    f"<ul>{items}</ul></details>",
                ]
            )
    return _table(["status", "check", "finding"], rows, {0: "nowrap", 1: "check"})


def _numbers(data: ReportData) -> str:
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in data.numbers)
    return f'<table class="kv"><tbody>{rows}</tbody></table>'


def _store_numbers(store: StoreData) -> list[tuple[str, str]]:
    span = store.version_range
    lag = store.worst_lag
    skew = store.skew_now
    return [
        ("provider", store.provider),
        ("partitions", fmt_int(store.num_partitions)),
        ("versions", "none" if span is None else f"{span[0]:,}..{span[1]:,}"),
        ("history", store.history_note),
        (
            "raw RocksDB keys (newest version)" if store.rows_line else "keys (newest version)",
            fmt_int(store.keys_now),
        ),
        *([("rows per state variable", store.rows_line)] if store.rows_line else []),
        ("on disk", f"{fmt_bytes(store.bytes_on_disk)} in {store.files_on_disk:,} files"),
        ("skew (max / median keys, newest)", UNKNOWN if skew is None else f"{skew:.2f}×"),
        (
            "worst snapshot lag",
            UNKNOWN
            if lag is None
            else f"partition {lag[0]}: {lag[1]} versions since a snapshot, "
            f"replay {fmt_bytes(lag[2])}",
        ),
        *_forensic_numbers(store),
    ]


# ---- growth attribution and restart cost ---------------------------------------------------


def _forensic_numbers(store: StoreData) -> list[tuple[str, str]]:
    f = store.forensics
    if f is None:
        return []
    out = list(f.restart_lines())
    if f.growth is None:
        out.append(("growth attribution", f.growth_note))
    else:
        out.append(("growth attribution", f.growth.sentence()))
    return out


def _growth_table(store: StoreData) -> str:
    f = store.forensics
    if f is None or f.growth is None or not f.growth.contributors:
        return ""
    g = f.growth
    rows = [
        [
            f"<code>{_e(c.field)}</code>",
            f"<code>{_e(c.value)}</code>",
            _e(fmt_int(c.keys)),
            _e(f"{c.share:.1%}"),
            _e(f"{c.share_of_all:.1%}"),
        ]
        for c in g.contributors
    ]
    caption = (
        f"<h3>New keys since version {g.base:,} (in the store at version {g.newest:,}, not "
        f"at {g.base:,}): {g.new_keys:,}</h3>"
    )
    note = f"<p>{_e(g.share_note())}</p>" if g.share_sample else ""
    return (
        caption
        + _table(
            ["key field", "value", "new keys", "share of new keys", "share of all keys now"],
            rows,
            {2: "num", 3: "num", 4: "num"},
        )
        + note
    )


def _operators(data: ReportData) -> str:
    rows = []
    for s in data.stores:
        span = s.version_range
        rows.append(
            [
                _e(s.operator_id),
                _e(s.operator_name),
                f"<code>{_e(s.store_name)}</code>",
                _e(s.provider),
                _e(fmt_int(s.num_partitions)),
                _e("none" if span is None else f"{span[0]:,}..{span[1]:,}"),
                _e(fmt_int(s.keys_now)),
                _e(fmt_bytes(s.bytes_on_disk)),
            ]
        )
    return _table(
        ["operator", "name", "store", "provider", "partitions", "versions", "keys", "on disk"],
        rows,
        {0: "nowrap", 2: "nowrap", 4: "num", 5: "nowrap", 6: "num", 7: "num"},
    )


def _schema(text: str) -> str:
    """A Spark simple string that wraps after its commas rather than mid-name."""
    return _e(text).replace(",", ",<wbr>")


def _schemas(data: ReportData) -> str:
    """One row per store, or per state variable where a store has several (transformWithState)."""
    rows = []
    for s in data.stores:
        store = f"{_e(s.operator_id)} <code>{_e(s.store_name)}</code>"
        if not s.variables:
            key, value = s.key_schema, s.value_schema
            note = f"<div class='hint'>{_e(s.variables_note)}</div>" if s.variables_note else ""
            rows.append(
                [store + note, f"<code>{_schema(key)}</code>", f"<code>{_schema(value)}</code>"]
            )
        rows += [
            [
                f"{store} · {_e(var.label)}",
                f"<code>{_schema(var.key)}</code>",
                f"<code>{_schema(var.value)}</code>",
            ]
            for var in s.variables
        ]
    return _table(["store", "key schema", "value schema"], rows, {0: "nowrap"})


def _problems(problems: pd.DataFrame) -> str:
    if problems.empty:
        return '<p class="muted">None: every file the collector read decoded.</p>'
    rows = [
        [f'<span class="path mono">{_e(r.path)}</span>', _e(r.kind), _e(r.message)]
        for r in problems.itertuples()
    ]
    return _table(["file", "error", "message"], rows)


def _charts(group: ChartGroup, first_id: int) -> tuple[str, list[dict[str, Any]]]:
    """The group's ``<figure>`` elements and each chart's spec (id and figure as JSON data)."""
    parts: list[str] = []
    specs: list[dict[str, Any]] = []
    if group.note:
        parts.append(f'<p class="note">{_e(group.note)}</p>')
    for i, chart in enumerate(group.charts, start=first_id):
        parts.append(
            f'<figure><div class="chart" id="fig-{i}"></div>'
            f"<figcaption>{_e(chart.caption)}</figcaption></figure>"
        )
        specs.append({"id": f"fig-{i}", "figure": json.loads(chart.figure.to_json())})
    return "".join(parts), specs


def _share_templates(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Move each figure's layout template into one list the page shares; return that list.

    Every figure carries the whole plotly template (about 7 KB), the same for all of them:
    written once, a report of 36 charts is 250 KB smaller. A spec names its template by
    index (``None``: it has none).
    """
    shared: dict[str, int] = {}
    templates: list[dict[str, Any]] = []
    for spec in specs:
        template = spec["figure"].get("layout", {}).pop("template", None)
        if template is None:
            spec["template"] = None
            continue
        key = json.dumps(template, sort_keys=True)
        if key not in shared:
            shared[key] = len(templates)
            templates.append(template)
        spec["template"] = shared[key]
    return templates


def render(data: ReportData) -> str:
    """The whole report as one HTML document."""
    groups = chart_groups(data)
    specs: list[dict[str, Any]] = []
    body: list[str] = []
    query_html, query_specs = _charts(groups[0], 0)
    specs += query_specs
    body.append(f'<h2 id="batches">Batches</h2>{query_html}')
    for group, store in zip(groups[1:], data.stores, strict=True):
        charts_html, store_specs = _charts(group, len(specs))
        specs += store_specs
        numbers = "".join(
            f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in _store_numbers(store)
        )
        body.append(
            f'<h2 id="{_e(group.anchor)}">State: {_e(group.title)}</h2>'
            f'<table class="kv"><tbody>{numbers}</tbody></table>{_growth_table(store)}'
            f"{charts_html}"
        )
    toc = [
        ("health", "Health"),
        ("numbers", "Key numbers"),
        ("batches", "Batches"),
        *((g.anchor, f"State: {g.title}") for g in groups[1:]),
        ("operators", "Operators and schemas"),
        ("problems", "Problems"),
    ]
    nav = "".join(f'<li><a href="#{_e(a)}">{_e(t)}</a></li>' for a, t in toc)
    verdict = data.verdict
    summary = data.summary
    scanned = f"{data.last_scan:%Y-%m-%d %H:%M:%S} UTC" if data.last_scan else "never"
    templates_json = script_json(json.dumps(_share_templates(specs)))
    figures_json = script_json("[" + ",\n".join(map(json.dumps, specs)) + "]")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="StateGlass">
<meta name="stateglass-charts" content="{len(specs)}">
<title>StateGlass report: {_e(data.name)} ({_e(verdict)})</title>
<style>{CSS}</style>
</head>
<body data-charts="{len(specs)}">
<main>
<p id="sg-no-charts" class="note" hidden>This browser cannot unpack the charts
 (it lacks DecompressionStream): open the report in a current Chrome, Edge, Firefox or Safari.</p>
<h1>StateGlass report: {_e(data.name)}</h1>
<div class="muted">Checkpoint <span class="path mono">{_e(data.checkpoint)}</span></div>
<div class="muted">Generated {data.generated_at:%Y-%m-%d %H:%M:%S} UTC from
 <span class="path mono">{_e(data.db_path)}</span>; last collected {_e(scanned)};
 {len(specs)} charts{_e("; " + data.as_of_note if data.as_of_note else "")}.</div>
<div class="verdict {_e(verdict)}"><span class="badge {_e(verdict)}">{_e(verdict)}</span>
 Overall health: {_e(summary)}.</div>
<nav><strong>Contents</strong><ol>{nav}</ol></nav>
<h2 id="health">Health</h2>
{_health(data)}
<h2 id="numbers">Key numbers</h2>
{_numbers(data)}
{"".join(body)}
<h2 id="operators">Operators and schemas</h2>
{_operators(data)}
{_schemas(data)}
<h2 id="problems">Problems</h2>
{_problems(data.problems)}
<footer>StateGlass reads Spark Structured Streaming checkpoints without a JVM. This file is
self-contained: its charts are drawn by the plotly.js copy inside it, with no network access.
State version V is written by batch V − 1.</footer>
</main>
<script type="application/json" id="sg-config">{json.dumps(PLOT_CONFIG)}</script>
<script type="application/json" id="sg-templates">{templates_json}</script>
<script type="application/json" id="sg-figures">{figures_json}</script>
<script type="application/gzip;base64" id="sg-plotly">{packed_plotly_js()}</script>
<script>{BOOT}</script>
</body>
</html>
"""
