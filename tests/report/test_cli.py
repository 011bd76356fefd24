"""``stateglass report`` on the command line: formats by suffix, and its one-line errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.collectors.db.read import read_query
from tests.conftest import SAMPLES


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A private copy of a sample: a failing check must not leave a file in the real one."""
    dst = tmp_path / "agg-hdfs"
    shutil.copytree(SAMPLES / "spark-4.3/agg-hdfs", dst)
    return dst


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(["report", *argv])
    return status, capsys.readouterr().err


def test_collects_then_writes_markdown_and_html(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "sg.duckdb"
    status, err = _run(capsys, str(checkpoint), "--db", str(db), "-o", str(tmp_path / "r.md"))
    assert status == 0, err
    assert (tmp_path / "r.md").read_text().startswith("# StateGlass report: agg-hdfs")
    assert read_query(str(db), "SELECT count(*) FROM batches")[0][0] == 12
    status, err = _run(
        capsys, str(checkpoint), "--db", str(db), "--no-collect", "-o", str(tmp_path / "r.html")
    )
    assert status == 0, err
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("name", ["report.txt", "report", "report.HTML.bak"])
def test_unknown_suffix(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    db = tmp_path / "sg.duckdb"
    status, err = _run(capsys, str(checkpoint), "--db", str(db), "-o", str(tmp_path / name))
    assert status == 2
    assert err.count("\n") == 1 and "unknown report format" in err and ".html, .md or .pdf" in err
    assert not db.exists(), "nothing is collected before the arguments are checked"


@pytest.mark.parametrize("inside", ["report.html", "state/0/report.md"])
def test_refuses_output_inside_the_checkpoint(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], inside: str
) -> None:
    before = sorted(p for p in checkpoint.rglob("*"))
    target = checkpoint / inside
    status, err = _run(
        capsys, str(checkpoint), "--db", str(tmp_path / "sg.duckdb"), "-o", str(target)
    )
    assert status == 2
    assert err.count("\n") == 1 and "is inside the checkpoint" in err
    assert sorted(p for p in checkpoint.rglob("*")) == before


def test_not_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, err = _run(capsys, str(tmp_path), "-o", str(tmp_path / "r.html"))
    assert status == 2
    assert err.count("\n") == 1 and "not a Structured Streaming checkpoint" in err


def test_not_collected_with_no_collect(
    checkpoint: Path, report_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = _run(
        capsys, str(checkpoint), "--db", report_db, "--no-collect", "-o", str(tmp_path / "r.md")
    )
    assert status == 2
    assert err.count("\n") == 1 and "not in the database" in err


def test_refuses_a_database_inside_the_checkpoint(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(p for p in checkpoint.rglob("*"))
    db = checkpoint / "sg.duckdb"
    status, err = _run(capsys, str(checkpoint), "--db", str(db), "-o", str(tmp_path / "r.md"))
    assert status == 2
    assert err.count("\n") == 1 and "is inside the checkpoint" in err
    assert sorted(p for p in checkpoint.rglob("*")) == before
