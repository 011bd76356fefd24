"""The catalog's read-ahead (:func:`decoded_ahead`): partitions decoded in threads, handed to
DuckDB in order, never more than the window ahead of what was taken, failures where they come."""

from __future__ import annotations

import threading

import pytest

from stateglass.collectors.catalog import SqlLimits, SqlSession
from stateglass.collectors.catalog.sources import decoded_ahead
from stateglass.collectors.errors import BadConfig
from tests.conftest import SAMPLES

WAIT_S = 60


def test_decodes_run_at_once_and_come_in_order() -> None:
    """Item 0 finishes only after item 1 has: in order, both decoded at the same time."""
    second_done = threading.Event()

    def decode(item: int) -> int:
        if item == 0:
            assert second_done.wait(WAIT_S), "item 1 never ran beside item 0"
        elif item == 1:
            second_done.set()
        return item * 10

    assert list(decoded_ahead(decode, [0, 1, 2, 3], 2)) == [0, 10, 20, 30]


def test_a_failure_comes_at_its_item() -> None:
    def decode(item: int) -> int:
        if item == 2:
            raise ValueError("partition 2 does not decode")
        return item

    got = decoded_ahead(decode, [0, 1, 2, 3], 3)
    assert [next(got), next(got)] == [0, 1]
    with pytest.raises(ValueError, match="partition 2"):
        next(got)


def test_a_consumer_that_stops_starts_nothing_past_the_window() -> None:
    started: list[int] = []
    lock = threading.Lock()

    def decode(item: int) -> int:
        with lock:
            started.append(item)
        return item

    got = decoded_ahead(decode, list(range(50)), 2)
    assert next(got) == 0
    got.close()  # waits for the decodes in flight
    settled = sorted(started)
    assert settled == list(range(len(settled)))
    assert len(settled) <= 3  # the one taken and the two decoded ahead of it


def test_one_thread_decodes_here_one_after_the_other() -> None:
    names: list[str] = []

    def decode(item: int) -> int:
        names.append(threading.current_thread().name)
        return item

    assert list(decoded_ahead(decode, [0, 1, 2], 1)) == [0, 1, 2]
    assert set(names) == {threading.current_thread().name}


def test_every_window_reads_the_same_rows() -> None:
    query = (
        "SELECT partition_id, key, value, batch_id FROM agg_hdfs.op0_default "
        "WHERE batch_id >= 0 ORDER BY ALL"
    )
    answers = []
    for decoders in (1, 3):
        with SqlSession(
            [str(SAMPLES / "spark-4.3" / "agg-hdfs")], limits=SqlLimits(decoders=decoders)
        ) as session:
            answers.append(session.execute(query).table)
    assert answers[0].num_rows > 0
    assert answers[0].equals(answers[1])


def test_no_decoders_is_refused() -> None:
    with pytest.raises(BadConfig, match="must be 1 or more"):
        SqlLimits(decoders=0)
