"""PDF through headless Chromium, and the one-line error without Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.app.report import pdf, write_report
from tests.conftest import SAMPLES
from tests.report.conftest import report_now


def test_pdf_is_printed(report_db: str, tmp_path: Path) -> None:
    if pdf.find_chromium() is None:
        pytest.skip("no Chromium on PATH: install Debian's chromium package")
    checkpoint = str(SAMPLES / "spark-4.3/agg-rocks")
    out = tmp_path / "report.pdf"
    write_report(report_db, checkpoint, str(out), now=report_now(report_db, checkpoint))
    data = out.read_bytes()
    assert data.startswith(b"%PDF-")
    assert data.rstrip().endswith(b"%%EOF")
    # Charts are vector paths: a report without them prints to a few tens of KiB.
    assert len(data) > 100_000


def test_no_chromium_is_one_line(
    report_db: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(pdf, "CANDIDATES", ("chromium",))
    monkeypatch.setenv("PATH", str(tmp_path))
    out = tmp_path / "report.pdf"
    checkpoint = str(SAMPLES / "spark-4.3/agg-rocks")
    status = main(["report", checkpoint, "--db", report_db, "--no-collect", "-o", str(out)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1
    assert "install Debian's `chromium` package" in err and ".html" in err
    assert not out.exists()
