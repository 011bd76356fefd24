"""The error tree: each kind of problem on its own branch, every error one line that survives
a trip to another process, and a scan that files checkpoint errors but stops on the others."""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from stateglass.collectors import errors
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.fs import FileSystem
from stateglass.collectors.scan.chains import ChainResult, ChainTask
from stateglass.collectors.scan.scanner import Scanner
from tests.collectors.helpers import SAMPLES

AGG_HDFS = str(SAMPLES / "spark-4.3" / "agg-hdfs")
# Problems that are not the checkpoint's: a scan stops on them instead of filing a problem.
NOT_THE_CHECKPOINTS = [
    errors.DatabaseError,
    errors.DatabaseBusy,
    errors.BadConfig,
    errors.EngineError,
    errors.BadProgressPath,
    errors.InsideCheckpoint,
    errors.StorageError,
]
EVERY_ERROR = [
    cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, errors.CollectorError)
]


@pytest.mark.parametrize("cls", NOT_THE_CHECKPOINTS, ids=lambda c: c.__name__)
def test_other_kinds_are_beside_checkpoint_errors(cls: type[errors.CollectorError]) -> None:
    assert issubclass(cls, errors.CollectorError)
    assert not issubclass(cls, errors.CheckpointError)


def test_a_busy_database_is_a_database_error() -> None:
    assert issubclass(errors.DatabaseBusy, errors.DatabaseError)


@pytest.mark.parametrize("cls", EVERY_ERROR, ids=lambda c: c.__name__)
def test_every_error_crosses_processes_whole(cls: type[errors.CollectorError]) -> None:
    exc = cls("/data/cp/state/0/1/3.delta", "cut short at byte 12")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert (back.path, back.why, str(back)) == (exc.path, exc.why, str(exc))
    assert str(back) == "/data/cp/state/0/1/3.delta: cut short at byte 12"


class FailingEngine:
    """An engine that fails with ``error`` before returning a chain."""

    name = "failing"
    carries_keys = False

    def __init__(self, error: errors.CollectorError) -> None:
        self.error = error

    def run(self, tasks: Sequence[ChainTask], fs: FileSystem) -> Iterator[ChainResult]:
        raise self.error


def test_an_engine_failure_stops_the_scan_before_anything_is_written(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "db.duckdb"))
    engine = FailingEngine(errors.EngineError("spark://nowhere:7077", "master unreachable"))
    with pytest.raises(errors.EngineError, match="master unreachable"):
        Scanner(db, engine).scan(AGG_HDFS)
    assert read_query(db.path, "SELECT count(*) FROM checkpoints") == [(0,)]
    assert db.known(AGG_HDFS).log_files == {}


def test_a_checkpoint_error_from_the_engine_is_filed_and_the_scan_goes_on(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "db.duckdb"))
    engine = FailingEngine(errors.CorruptFile(f"{AGG_HDFS}/state/0/0/1.delta", "bad frame"))
    summary = Scanner(db, engine).scan(AGG_HDFS)
    assert summary.problems == 1
    assert read_query(db.path, "SELECT kind, message FROM problems") == [
        ("CorruptFile", "bad frame")
    ]
    assert read_query(db.path, "SELECT count(*) FROM batches")[0][0] > 0


def test_a_file_that_is_not_a_database_is_a_database_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.duckdb"
    path.write_bytes(b"not a database\n")
    with pytest.raises(errors.DatabaseError, match="cannot open the database") as info:
        read_query(str(path), "SELECT 1")
    assert not isinstance(info.value, errors.CheckpointError)


def test_metrics_say_the_database_is_down_rather_than_fail(tmp_path: Path) -> None:
    from stateglass.app.metrics import UP_GAUGE, HistoryCollector

    path = tmp_path / "notes.duckdb"
    path.write_bytes(b"not a database\n")
    families = list(HistoryCollector(str(path), lock_timeout_s=0.1).collect())
    assert [(f.name, [s.value for s in f.samples]) for f in families] == [(UP_GAUGE, [0.0])]
