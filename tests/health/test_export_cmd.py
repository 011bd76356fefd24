"""``stateglass export``: a table or view to Parquet or CSV, never into a checkpoint."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.collectors.db.read import read_query
from tests.health.conftest import SAMPLES, collect, copy_checkpoint


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "h.duckdb"
    for name in ("spark-4.3/agg-rocks", "spark-4.3/join-hdfs"):
        collect(path, SAMPLES / name)
    return path


def test_parquet_round_trip(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow.parquet as pq

    root = str(SAMPLES / "spark-4.3" / "join-hdfs")
    out = tmp_path / "versions.parquet"
    args = ["export", "--db", str(db), "--table", "state_versions", "-o", str(out)]
    assert main([*args, "--checkpoint", root]) == 0
    table = pq.read_table(out)
    expected = read_query(
        str(db), "SELECT * FROM state_versions WHERE checkpoint = ? ORDER BY ALL", [root]
    )
    assert len(expected) == 4 * 12 * 4  # four join stores, 12 versions, 4 partitions
    assert [tuple(r.values()) for r in table.to_pylist()] == expected
    assert f"wrote {len(expected)} rows of state_versions" in capsys.readouterr().err


def test_csv_round_trip_of_a_view(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "durations.csv"
    assert main(["export", "--db", str(db), "--table", "batch_durations", "-o", str(out)]) == 0
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    expected = read_query(str(db), "SELECT * FROM batch_durations ORDER BY ALL")
    assert rows[0] == ["checkpoint", "batch_id", "duration_ms"]
    # A NULL (no duration: mtimes of a cloned checkpoint) is an empty CSV field.
    assert [(r[0], int(r[1]), int(r[2]) if r[2] else None) for r in rows[1:]] == expected
    assert len(expected) == 24


def test_unknown_table_lists_the_valid_names(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.csv"
    assert main(["export", "--db", str(db), "--table", "state", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unknown table 'state'" in err
    for name in ("batches", "state_versions", "snapshot_lag", "temp_files", "schema_files"):
        assert name in err
    assert "schema_info" not in err
    assert not out.exists()


def test_refuses_to_write_inside_a_checkpoint(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = copy_checkpoint(SAMPLES / "spark-4.3" / "agg-hdfs", tmp_path / "cp")  # not collected
    for target in (cp / "out.parquet", cp / "state" / "0" / "out.csv"):
        code = main(["export", "--db", str(db), "--table", "batches", "-o", str(target)])
        assert code == 2
        assert "inside the checkpoint" in capsys.readouterr().err
        assert not target.exists()


def test_a_table_an_older_database_lacks_is_one_line(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import duckdb

    old = tmp_path / "old.duckdb"
    shutil.copyfile(db, old)
    with duckdb.connect(str(old)) as conn:
        conn.execute("DROP TABLE temp_files")
    out = tmp_path / "t.csv"
    assert main(["export", "--db", str(old), "--table", "temp_files", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no 'temp_files' yet" in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["-o", "out.json"], "must end in .parquet or .csv", id="suffix"),
        pytest.param(["-o", "no/such/dir/x.csv"], "no such directory", id="dir"),
        pytest.param(["-o", "x.csv", "--checkpoint", "/nowhere"], "not in the database", id="cp"),
    ],
)
def test_bad_arguments_are_one_line_exit_2(
    db: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--db", str(db), "--table", "batches", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
