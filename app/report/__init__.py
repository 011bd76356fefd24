"""Reports of one checkpoint: self-contained HTML, a Markdown summary, PDF via Chromium.

Example::

    from stateglass.app.report import render_html, write_report
    html = render_html("~/.stateglass/stateglass.duckdb", "/data/checkpoints/orders")
    write_report("sg.duckdb", "/data/checkpoints/orders", "orders.pdf")   # by suffix

The checkpoint must be collected into the database first (``stateglass collect``);
``stateglass report`` does that itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from stateglass.app.atomic import replacing
from stateglass.app.errors import OutputError, ReportError

# pandas, plotly and DuckDB load only when a report is made: a bad suffix fails fast.
if TYPE_CHECKING:
    from stateglass.app.report.model import ReportData


def render_html(db_path: str, checkpoint: str, now: datetime | None = None) -> str:
    """The self-contained HTML report (what the dashboard's "Download report" offers)."""
    from stateglass.app.report import html
    from stateglass.app.report.model import load_report

    return html.render(load_report(db_path, checkpoint, now))


def render_markdown(db_path: str, checkpoint: str, now: datetime | None = None) -> str:
    """The Markdown summary for a ticket."""
    from stateglass.app.report import markdown
    from stateglass.app.report.model import load_report

    return markdown.render(load_report(db_path, checkpoint, now))


def _write_text(text: str, output: str) -> None:
    try:
        with replacing(output) as tmp, open(tmp, "x", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise OutputError(f"{output}: cannot write: {exc.strerror or exc}") from exc


def _html(data: ReportData, output: str) -> None:
    from stateglass.app.report import html

    _write_text(html.render(data), output)


def _markdown(data: ReportData, output: str) -> None:
    from stateglass.app.report import markdown

    _write_text(markdown.render(data), output)


def _pdf(data: ReportData, output: str) -> None:
    from stateglass.app.report import html, pdf

    pdf.html_to_pdf(html.render(data), output)


# Output suffix -> writer; the CLI picks by the suffix of -o.
WRITERS: dict[str, Callable[[ReportData, str], None]] = {
    ".html": _html,
    ".htm": _html,
    ".md": _markdown,
    ".pdf": _pdf,
}


def writer_for(output: str) -> Callable[[ReportData, str], None]:
    """The writer for ``output``'s suffix, or a one-line :class:`ReportError`."""
    suffix = os.path.splitext(output)[1].lower()
    try:
        return WRITERS[suffix]
    except KeyError:
        raise ReportError(
            f"{output}: unknown report format {suffix or '(no suffix)'!r}; use .html, .md or .pdf"
        ) from None


def write_report(db_path: str, checkpoint: str, output: str, now: datetime | None = None) -> None:
    """Write the report in the format of ``output``'s suffix (.html, .md or .pdf)."""
    from stateglass.app.report.model import load_report

    write = writer_for(output)
    write(load_report(db_path, checkpoint, now), output)


__all__ = ["WRITERS", "render_html", "render_markdown", "write_report", "writer_for"]
