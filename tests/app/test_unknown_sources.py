"""A source StateGlass does not know is shown as its offsets say, never as another source.

Real queries: a socket source fed from a loopback server (Spark's LongOffset, no log in
``sources/``) and a rate source (the same bare-number offset, and a log in ``sources/``)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app import figures, queries
from stateglass.app.dashboard.context import DB_ENV
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint

LINES_PER_BATCH = 4
BATCHES = 3


def _commits(checkpoint: Path) -> int:
    found = checkpoint / "commits"
    return sum(1 for f in found.iterdir() if f.name.isdigit()) if found.is_dir() else 0


def _run_until(query: Any, checkpoint: Path, commits: int, fed: threading.Event) -> None:
    deadline = time.monotonic() + 180
    while _commits(checkpoint) < commits and time.monotonic() < deadline:
        fed.wait(0.2)
    query.stop()
    assert _commits(checkpoint) >= commits, "the query did not commit its batches"


def _socket_query(spark: Any, checkpoint: Path) -> None:
    """A socket source read from a server on 127.0.0.1: each batch its lines, once the
    previous batch has committed."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    done = threading.Event()

    def feed() -> None:
        conn, _ = server.accept()
        with conn:
            for batch in range(BATCHES):
                while _commits(checkpoint) < batch and not done.is_set():
                    done.wait(0.2)
                conn.sendall("".join(f"k{i} {batch}\n" for i in range(LINES_PER_BATCH)).encode())
            done.wait(120)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    lines = spark.readStream.format("socket").option("host", "127.0.0.1")
    query = (
        lines.option("port", port)
        .load()
        .groupBy("value")
        .count()
        .writeStream.outputMode("complete")
        .format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        _run_until(query, checkpoint, BATCHES, done)
    finally:
        done.set()
        server.close()
        feeder.join(10)


def _rate_query(spark: Any, checkpoint: Path) -> None:
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="1 second")
        .start()
    )
    _run_until(query, checkpoint, 3, threading.Event())


@pytest.fixture(scope="module")
def sources_db(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("sources")
    _socket_query(spark, root / "socket")
    _rate_query(spark, root / "rate")
    db = Database(str(root / "history.duckdb"))
    for name in ("socket", "rate"):
        scan_checkpoint(db, str(root / name))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DB_ENV, db.path)
        yield db.path, root


@pytest.mark.spark
def test_a_socket_source_is_shown_as_its_offsets_say(sources_db: tuple[str, Path]) -> None:
    db, root = sources_db
    assert not (root / "socket" / "sources").exists()
    inputs = queries.input_per_batch(db, str(root / "socket"))
    assert set(inputs["unit"]) == {queries.BARE_NUMBER}
    # Spark's LongOffset of a socket source counts lines: the server sends them 4 at a time
    # (a trigger may take two sends), so each batch read a multiple of 4, nothing guessed.
    amounts = list(inputs["amount"])
    assert amounts and all(a > 0 and a % LINES_PER_BATCH == 0 for a in amounts)
    assert sum(amounts) <= LINES_PER_BATCH * BATCHES
    layout = figures.input_per_batch(inputs).to_dict()["layout"]
    assert "rate" not in json.dumps(layout)
    assert layout["yaxis"]["title"]["text"] == "input (offset steps)"


@pytest.mark.spark
def test_a_rate_source_keeps_its_seconds(sources_db: tuple[str, Path]) -> None:
    db, root = sources_db
    assert (root / "rate" / "sources" / "0").is_dir()
    inputs = queries.input_per_batch(db, str(root / "rate"))
    assert set(inputs["unit"]) == {queries.RATE_SECONDS}


def _query_page() -> None:
    from stateglass.app.dashboard import context
    from stateglass.app.dashboard.views import query

    context.live_status()
    query.render()


@pytest.mark.spark
def test_query_page_shows_no_rate_label_for_a_socket_source(
    sources_db: tuple[str, Path],
) -> None:
    _, root = sources_db
    at = AppTest.from_function(_query_page, default_timeout=60)
    at.session_state["sg_checkpoint"] = str(root / "socket")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    (chart,) = [s for s in specs if "Input per batch" in json.dumps(s["layout"].get("title", ""))]
    assert "offset steps" in json.dumps(chart)
    assert "rate" not in json.dumps(chart["layout"]).lower()
