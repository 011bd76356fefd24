"""``unbounded_state`` on a transformWithState store says its counts are raw RocksDB keys of
every column family, not rows per state variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from stateglass.app.cli import main
from tests.health.conftest import SAMPLES, collect, judge

TWS = SAMPLES / "spark-4.3" / "tws-rocks-cl"
AGG = SAMPLES / "spark-4.3" / "agg-hdfs"


def test_transform_with_state_counts_are_labelled_raw_keys(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    [found] = judge(db, collect(db, TWS))["unbounded_state"]
    assert "0/default raw RocksDB keys (every column family" in found.finding


def test_other_stores_count_keys(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    [found] = judge(db, collect(db, AGG))["unbounded_state"]
    assert "0/default keys " in found.finding and "RocksDB" not in found.finding


def test_check_shows_rows_per_state_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "db.duckdb")
    main(["check", str(TWS), "--db", db])
    out = capsys.readouterr().out.splitlines()
    row = next(i for i, line in enumerate(out) if "unbounded_state" in line)
    # The rows `stateglass state --state-var` returns, beside the raw keys the rule counts.
    assert " ".join(out[row + 1].split()) == (
        "rows per state variable: operator 0 default: by_kind 24 · recent 28 · stats 13 · timers 13"
    )
