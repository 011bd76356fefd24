"""StateGlassListener: Python 3.9 syntax, one JSON line per progress of a real query,
rotation, and dropping (never blocking) when its queue is full."""

from __future__ import annotations

import ast
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from stateglass.app.listener import stateglass_listener
from stateglass.app.listener.stateglass_listener import StateGlassListener
from stateglass.parsers import eventlog

SOURCE = Path(stateglass_listener.__file__)


def test_the_listener_is_python_3_9_syntax() -> None:
    tree = ast.parse(SOURCE.read_text(), feature_version=(3, 9))
    imports = {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    } | {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    # Nothing but the standard library and pyspark: it ships alone with --py-files.
    assert imports - {"pyspark"} <= set(sys.stdlib_module_names)
    # No `X | Y` at all, not even in annotations: a 3.9 user may drop the __future__ import.
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            raise AssertionError(f"runtime `|` at line {node.lineno}")


def _lines(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("progress-*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def test_a_real_query_writes_each_progress_as_one_line(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    listener = StateGlassListener(str(tmp_path / "progress"), max_bytes=3000, max_files=50)
    spark.streams.addListener(listener)
    inputs = tmp_path / "in"
    inputs.mkdir()
    try:
        query = (
            spark.readStream.schema("ts TIMESTAMP, key STRING")
            .option("maxFilesPerTrigger", 1)
            .json(str(inputs))
            .withWatermark("ts", "5 seconds")
            .groupBy(F.window("ts", "10 seconds"), "key")
            .count()
            .writeStream.format("noop")
            .outputMode("append")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .start()
        )
        for n in range(3):
            (inputs / f"{n}.json").write_text(
                json.dumps({"ts": f"2024-01-01T00:00:{10 * n:02d}Z", "key": "a"}) + "\n"
            )
            query.processAllAvailable()
        recent = [json.loads(p.json) for p in query.recentProgress]
        query.stop()
        assert listener.wait_written(len(recent) + 2)
    finally:
        spark.streams.removeListener(listener)
        listener.close()
    assert listener.dropped == 0
    lines = _lines(tmp_path / "progress")
    progress = [line for line in lines if "stateglassEvent" not in line]
    assert [(p["runId"], p["batchId"]) for p in progress] == [
        (p["runId"], p["batchId"]) for p in recent
    ]
    assert [p["stateOperators"][0]["numRowsTotal"] for p in progress] == [
        p["stateOperators"][0]["numRowsTotal"] for p in recent
    ]
    # Rotated at 3000 bytes: several files, each a run of whole lines our parser reads.
    files = sorted((tmp_path / "progress").glob("progress-*.jsonl"))
    assert len(files) > 1
    events = [e for f in files for e in eventlog.read_events(f.read_bytes(), "none").events]
    assert {type(e).__name__ for e in events} == {
        "QueryStarted",
        "QueryProgress",
        "QueryTerminated",
    }


def test_full_queue_drops_and_counts_and_old_files_are_pruned(tmp_path: Path) -> None:
    listener = StateGlassListener(str(tmp_path), max_bytes=100, max_files=2, queue_size=1)
    started = SimpleNamespace(id="q", runId="r", name="n", timestamp="2024-01-01T00:00:00.000Z")
    for n in range(5):
        listener.onQueryStarted(started)
        deadline = time.monotonic() + 5
        while listener.written + listener.dropped < n + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    listener.close()
    assert listener.written == 5 and listener.dropped == 0
    assert len(list(tmp_path.glob("progress-*.jsonl"))) == 2  # each line rotates; 2 kept
    # The writer is gone: the queue fills, and what does not fit is dropped, not waited for.
    before = time.monotonic()
    for _ in range(3):
        listener.onQueryStarted(started)
    assert time.monotonic() - before < 1.0
    assert listener.dropped == 2
