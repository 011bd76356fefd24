"""``--progress``: listing event-log and listener directories, incremental reads of logs that
are still being written, and the refusals (a path inside a checkpoint, a missing one)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.errors import BadProgressPath
from stateglass.collectors.fs import LOCAL
from stateglass.collectors.progress import ProgressCollector, list_progress_files
from stateglass.parsers import eventlog
from tests.collectors.helpers import SAMPLES

DATA = Path(__file__).resolve().parents[1] / "parsers" / "data" / "eventlogs"


def _rolling_copy(tmp_path: Path, codec: str = "zstd") -> tuple[Path, Path, bytes, str]:
    """A copy of a real rolling log whose application still runs (appstatus .inprogress),
    with its events file empty for now: (directory, events file, full bytes, app id)."""
    source = next(p for p in (DATA / codec).iterdir() if p.is_dir())
    target = tmp_path / "logs" / source.name
    target.mkdir(parents=True)
    events = next(p for p in source.iterdir() if p.name.startswith("events_"))
    app_id = source.name[len(eventlog.ROLLING_DIR_PREFIX) :]
    (target / f"appstatus_{app_id}.inprogress").write_bytes(b"")
    (target / events.name).write_bytes(b"")
    return target, target / events.name, events.read_bytes(), app_id


def _count(db: str, table: str) -> int:
    return read_query(db, f"SELECT count(*) FROM {table}")[0][0]


def test_a_growing_rolling_log_is_read_appended_events_only(tmp_path: Path) -> None:
    directory, events_file, data, app_id = _rolling_copy(tmp_path)
    db = Database(str(tmp_path / "sg.duckdb"))
    collector = ProgressCollector(db)
    root = str(directory.parent)
    total = len([e for e in eventlog.read_events(data, "zstd").events])
    seen = 0
    for cut in (len(data) // 3, 2 * len(data) // 3, len(data) - 3, len(data)):
        events_file.write_bytes(data[:cut])
        collector.collect(root)
        (row,) = read_query(db.path, "SELECT events_read, complete, raw_offset FROM progress_files")
        assert row[0] >= seen and row[1] is False
        seen = row[0]
    assert seen == total
    # Unchanged and still running: nothing is read.
    assert collector.collect(root).files_read == 0
    # The application ends: the marker loses .inprogress and the file is complete.
    (directory / f"appstatus_{app_id}.inprogress").rename(directory / f"appstatus_{app_id}")
    assert collector.collect(root).progress_events == 0
    assert read_query(db.path, "SELECT events_read, complete FROM progress_files") == [
        (total, True)
    ]
    assert collector.collect(root).files_read == 0
    oracle = eventlog.read_events(data, "zstd").events
    assert _count(db.path, "progress") == len(
        [e for e in oracle if isinstance(e, eventlog.QueryProgress)]
    )


def test_an_inprogress_single_file_continues_under_its_final_name(tmp_path: Path) -> None:
    source = next((DATA / "lz4").glob("*.lz4"))
    data = source.read_bytes()
    logs = tmp_path / "logs"
    logs.mkdir()
    growing = logs / (source.name + eventlog.INPROGRESS)
    growing.write_bytes(data[: len(data) // 2])
    db = Database(str(tmp_path / "sg.duckdb"))
    collector = ProgressCollector(db)
    first = collector.collect(str(logs))
    (listed,) = list_progress_files(LOCAL, str(logs))
    assert listed.codec == "lz4" and not listed.complete
    growing.unlink()
    (logs / source.name).write_bytes(data)  # Spark's rename at the end
    second = collector.collect(str(logs))
    expected = [e for e in eventlog.read_events(data, "lz4").events]
    progress = [e for e in expected if isinstance(e, eventlog.QueryProgress)]
    assert first.progress_events + second.progress_events == len(progress)
    assert _count(db.path, "progress") == len(progress)


def test_progress_inside_a_checkpoint_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = SAMPLES / "spark-4.3" / "agg-hdfs"
    db = str(tmp_path / "sg.duckdb")
    argv = ["collect", str(checkpoint), "--db", db, "--progress", str(checkpoint / "state")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "inside the checkpoint" in err
    assert not Path(db).exists()  # refused before anything was written
    with pytest.raises(BadProgressPath, match="no such directory"):
        ProgressCollector(Database(db)).collect(str(tmp_path / "missing"))


def test_event_log_dir_with_both_layouts(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(next(p for p in (DATA / "snappy").iterdir() if p.is_dir()), logs / "a")
    (logs / "a").rename(logs / next(p for p in (DATA / "snappy").iterdir() if p.is_dir()).name)
    shutil.copy(next((DATA / "lz4").glob("*.lz4")), logs)
    (logs / "unrelated.txt").write_text("x")
    files = list_progress_files(LOCAL, str(logs))
    assert sorted(f.codec for f in files) == ["lz4", "snappy"]
    assert all(f.complete for f in files)
    db = Database(str(tmp_path / "sg.duckdb"))
    summary = ProgressCollector(db).collect(str(logs))
    assert summary.files_read == 2
    assert len(read_query(db.path, "SELECT DISTINCT query_id FROM progress")) == 2


def test_watch_polls_progress_while_the_log_grows(tmp_path: Path) -> None:
    import argparse
    import threading
    import time

    from stateglass.app.commands import watch

    directory, events_file, data, _ = _rolling_copy(tmp_path)

    def progress_in(prefix: bytes) -> int:
        events = eventlog.read_events(prefix, "zstd").events
        return len([e for e in events if isinstance(e, eventlog.QueryProgress)])

    # A prefix holding some, not all, of the progress events.
    cut = next(c for c in range(64, len(data), 64) if progress_in(data[:c]) > 0)
    assert progress_in(data[:cut]) < progress_in(data)
    events_file.write_bytes(data[:cut])
    db = str(tmp_path / "sg.duckdb")
    args = argparse.Namespace(
        checkpoints=[str(SAMPLES / "spark-4.3" / "agg-hdfs")],
        db=db,
        engine="local",
        master=None,
        debounce=0.2,
        progress=[str(directory.parent)],
    )
    stop = threading.Event()
    thread = threading.Thread(target=watch.run, args=(args, stop))
    thread.start()
    try:
        expected = len(
            [
                e
                for e in eventlog.read_events(data, "zstd").events
                if isinstance(e, eventlog.QueryProgress)
            ]
        )
        deadline = time.monotonic() + 120

        def rows() -> int:
            try:
                return _count(db, "progress")
            except Exception:  # the watcher has not created the database yet
                return -1

        while rows() <= 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert 0 < rows() < expected
        events_file.write_bytes(data)  # Spark appends the rest
        while rows() != expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _count(db, "progress") == expected
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
