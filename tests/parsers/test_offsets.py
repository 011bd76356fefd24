"""Source offsets as positions (``parsers/offsets.py``): text in, a number and a unit out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stateglass.parsers.offsets import (
    BARE_NUMBER,
    FILE_LOG,
    batch_positions,
    offset_position,
    rate_source_rows,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param('{"t":{"0":10,"1":5}}', (15.0, "records"), id="kafka"),
        pytest.param('{"a":{"0":3},"b":{"0":4,"1":1}}', (8.0, "records"), id="kafka-two-topics"),
        # -1 / -2 stand for latest / earliest before a partition was first read.
        pytest.param('{"t":{"0":-1,"1":-2,"2":7}}', (7.0, "records"), id="kafka-unread"),
        pytest.param('{"offset":350,"timestamp":2}', (350.0, "rows"), id="rate-micro-batch"),
        # Spark's LongOffset (socket, memory, rate…): which source, the number does not say.
        pytest.param("15", (15.0, BARE_NUMBER), id="bare-number"),
        pytest.param('{"logOffset":4}', (4.0, FILE_LOG), id="file-source"),
        pytest.param('{"topic":"x"}', None, id="unknown-source"),
        pytest.param('{"t":{"0":"5"}}', None, id="kafka-offset-not-a-number"),
        pytest.param('{"t":{"0":true}}', None, id="kafka-offset-a-boolean"),
        pytest.param('{"t":{}}', None, id="kafka-topic-without-partitions"),
        pytest.param("{}", None, id="empty-object"),
        pytest.param("true", None, id="boolean"),
        pytest.param("1.5", None, id="fraction"),
        pytest.param('{"logOffset":"4"}', None, id="file-offset-as-text"),
        pytest.param("not json", None, id="garbage"),
    ],
)
def test_offset_position(text: str, expected: tuple[float, str] | None) -> None:
    assert offset_position(text) == expected


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.dictionaries(
            st.integers(0, 50).map(str), st.integers(-2, 2**62), min_size=1, max_size=4
        ),
        min_size=1,
        max_size=3,
    )
)
def test_kafka_position_is_the_sum_of_read_offsets(offsets: dict[str, dict[str, int]]) -> None:
    total = sum(max(v, 0) for partitions in offsets.values() for v in partitions.values())
    assert offset_position(json.dumps(offsets)) == (float(total), "records")


def _batch(*sources: Any) -> str:
    return json.dumps(list(sources))


def test_batch_positions_keep_the_sources_with_a_known_offset() -> None:
    raw = _batch(
        {"source_id": "0", "offset": "9"},
        {"source_id": "1", "offset": '{"t":{"0":4}}'},
        {"source_id": "2", "offset": None},  # Spark's void offset: no data yet
        {"source_id": "3", "offset": '{"topic":"x"}'},
        "not an entry",
    )
    assert batch_positions(raw) == [("0", 9.0, BARE_NUMBER), ("1", 4.0, "records")]


@pytest.mark.parametrize("raw", [None, float("nan"), "", "{", '{"source_id":"0"}', "[]"])
def test_batch_positions_of_anything_else_are_empty(raw: Any) -> None:
    assert batch_positions(raw) == []


RATE = {"description": "RateStreamV2[rowsPerSecond=50, rampUpTimeSeconds=0]", "numInputRows": 250}
KAFKA = {"description": "KafkaV2[Subscribe[t]]", "numInputRows": 20}


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        pytest.param(_batch(RATE), 250.0, id="rate"),
        pytest.param(_batch(KAFKA, RATE), 250.0, id="rate-beside-kafka"),
        pytest.param(_batch(KAFKA), None, id="no-rate-source"),
        # Which entry is which source id is not said, so neither gets rows.
        pytest.param(_batch(RATE, RATE), None, id="two-rate-sources"),
        pytest.param(_batch({**RATE, "numInputRows": None}), None, id="no-count"),
        pytest.param(_batch({**RATE, "numInputRows": True}), None, id="count-a-boolean"),
        pytest.param("not json", None, id="garbage"),
        pytest.param(None, None, id="null"),
    ],
)
def test_rate_source_rows(sources: Any, expected: float | None) -> None:
    assert rate_source_rows(sources) == expected
