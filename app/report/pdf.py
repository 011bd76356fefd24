"""PDF reports: the HTML report printed by headless Chromium.

Example::

    from stateglass.app.report.pdf import html_to_pdf
    html_to_pdf(render_html(db, cp), "report.pdf")

Chromium is not a Python dependency: without it, a one-line :class:`ReportError` says to
install Debian's ``chromium`` package or to write ``.html`` instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from stateglass.app.atomic import replacing
from stateglass.app.errors import ReportError

# Debian's package installs /usr/bin/chromium; the others are the usual names elsewhere.
CANDIDATES = ("chromium", "/usr/bin/chromium", "chromium-browser", "google-chrome")
# Virtual time lets every chart's script finish before the page is printed, without sleeping.
RENDER_BUDGET_MS = 20_000
TIMEOUT_S = 120.0
# Headless, and nothing that reaches the network on its own (updates, sync, field trials).
BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
FLAGS = (
    *BROWSER_FLAGS,
    "--disable-extensions",
    "--hide-scrollbars",
    "--run-all-compositor-stages-before-draw",
    f"--virtual-time-budget={RENDER_BUDGET_MS}",
    "--no-pdf-header-footer",
    # Charts take their width when drawn, before printing: draw them at the printed width
    # (A4 landscape less 10 mm margins, at 96 px per inch).
    "--window-size=1047,1400",
)


def find_chromium() -> str | None:
    """The Chromium executable on PATH (or Debian's /usr/bin/chromium); ``None`` without one."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def html_to_pdf(html: str, output: str, chromium: str | None = None) -> None:
    """Print ``html`` (a self-contained report) to the PDF file ``output``."""
    exe = chromium or find_chromium()
    if exe is None:
        raise ReportError(
            f"{output}: a PDF needs Chromium, which is not installed: install Debian's "
            "`chromium` package (apt-get install chromium), or write .html instead"
        )
    with tempfile.TemporaryDirectory(prefix="stateglass-pdf-") as tmp:
        page = os.path.join(tmp, "report.html")
        with open(page, "w", encoding="utf-8") as fh:
            fh.write(html)
        pdf = os.path.join(tmp, "report.pdf")
        cmd = [
            exe,
            *FLAGS,
            # A private profile: nothing of the user's browser is read or written.
            f"--user-data-dir={os.path.join(tmp, 'profile')}",
            f"--print-to-pdf={pdf}",
            "file://" + page,
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ReportError(f"{output}: Chromium ({exe}) could not print the PDF: {exc}") from exc
        if not _is_pdf(pdf):
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ReportError(
                f"{output}: Chromium ({exe}) did not write a PDF (exit {done.returncode}): {last}"
            )
        try:
            with replacing(output) as tmp:
                shutil.move(pdf, tmp)
        except OSError as exc:
            raise ReportError(f"{output}: cannot write the PDF: {exc.strerror or exc}") from exc


def _is_pdf(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(5) == b"%PDF-"
    except OSError:
        return False
