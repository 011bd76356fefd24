"""transformWithState: options, errors, `info`, the other sinks, and Scala's HashMap order.

Row-for-row fidelity against Spark is in test_fidelity.py (samples) and test_corpus_fidelity.py.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.cli import main as cli_main
from stateglass.parsers.state_rows import ScalaHashMapOrder
from tests.e2e.oracle import SAMPLES

TWS = os.path.join(SAMPLES, "spark-4.3", "tws-rocks-cl")
AGG = os.path.join(SAMPLES, "spark-4.3", "agg-rocks-cl")


@pytest.fixture(autouse=True)
def _needs_sample() -> None:
    if not os.path.isdir(TWS):
        pytest.skip("no transformWithState sample checkpoint")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [],
            "pick one with --state-var or --read-timers (state variables: stats, by_kind, recent)",
        ),
        (["--state-var", "nope"], "state variable 'nope' is not defined"),
        (["--state-var", "$eventTimers_keyToTimestamp"], "read it with --read-timers"),
        (["--state-var", "$rowCounter_recent"], "is not defined"),
        (["--state-var", "stats", "--read-timers"], "cannot be used together"),
    ],
)
def test_state_variable_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = _run(capsys, "state", TWS, *args)
    assert code == 2
    assert not out
    assert message in err
    assert err.count("\n") == 1


def test_tws_options_on_another_operator(capsys: pytest.CaptureFixture[str]) -> None:
    for option in (["--state-var", "x"], ["--read-timers"]):
        code, _, err = _run(capsys, "state", AGG, *option)
        assert code == 2
        assert "only for transformWithState operators" in err


def test_no_change_feed_for_timers(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "changes", TWS, "--read-timers", "--from", "0")
    assert code == 2
    assert "no change feed for registered timers" in err


def test_info_lists_state_variables(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "info", TWS, "--json")
    assert code == 0
    (store,) = json.loads(out)["stores"]
    assert store["time_mode"] == "EventTime"
    variables = {v["name"]: v for v in store["state_variables"]}
    assert {n: v["kind"] for n, v in variables.items()} == {
        "stats": "ValueState",
        "by_kind": "MapState",
        "recent": "ListState",
        "$eventTimers_keyToTimestamp": "TimerState",
    }
    assert list(variables["by_kind"]["columns"]) == ["key", "user_map_key", "user_map_value"]
    assert list(variables["by_kind"]["columns_no_flatten"]) == ["key", "map_value"]
    assert list(variables["recent"]["columns"]) == ["key", "list_element"]
    assert variables["$eventTimers_keyToTimestamp"]["option"] == "--read-timers"
    assert variables["$eventTimers_keyToTimestamp"]["columns"] == {
        "key": "struct<user:string>",
        "expiration_timestamp_ms": "bigint",
    }
    code, text, _ = _run(capsys, "info", TWS)
    assert "state var  by_kind  (MapState; --state-var by_kind)" in text
    assert "user_map_value" in text


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "state", TWS, "--state-var", "by_kind", "--format", "table")
    assert code == 0
    header = out.splitlines()[0].split()
    assert header == [
        "partition_id",
        "key.user",
        "user_map_key.kind",
        "user_map_value.n",
        "user_map_value.total",
    ]
    code, out, _ = _run(capsys, "state", TWS, "--read-timers", "--format", "table")
    assert out.splitlines()[0].split() == ["partition_id", "key.user", "expiration_timestamp_ms"]
    code, out, _ = _run(
        capsys, "state", TWS, "--state-var", "recent", "--no-flatten", "--format", "table"
    )
    assert out.splitlines()[0].split() == ["partition_id", "key.user", "list_value"]


def test_parquet_output(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    jsonl, parquet = tmp_path / "rows.jsonl", tmp_path / "rows.parquet"
    args = ["state", TWS, "--state-var", "by_kind", "--no-flatten"]
    assert cli_main([*args, "-o", str(jsonl)]) == 0
    assert cli_main([*args, "--format", "parquet", "-o", str(parquet)]) == 0
    table = pq.read_table(parquet)
    assert table.column_names == ["key", "map_value", "partition_id"]
    # Typed columns: the map is a real Arrow map of struct keys to struct values.
    map_type = table.schema.field("map_value").type
    assert str(map_type.key_type) == "struct<kind: string>"
    assert str(map_type.item_type) == "struct<n: int64, total: double>"
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    rows = table.to_pylist()
    assert [r["key"] for r in rows] == [line["key"] for line in lines]
    assert [r["partition_id"] for r in rows] == [line["partition_id"] for line in lines]
    # Spark's JSON names struct map keys by their raw bytes; the values line up entry by entry.
    assert [[v for _, v in r["map_value"]] for r in rows] == [
        list(line["map_value"].values()) for line in lines
    ]
    assert all(set(k) == {"kind"} for r in rows for k, _ in r["map_value"])


def test_parquet_keeps_types(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "agg.parquet"
    agg = os.path.join(os.path.dirname(TWS), "agg-hdfs")
    assert cli_main(["state", agg, "--format", "parquet", "-o", str(out)]) == 0
    schema = pq.read_table(out).schema
    value = schema.field("value").type
    assert str(schema.field("key").type.field("day").type) == "date32[day]"
    assert str(value.field("sum").type) == "decimal128(38, 10)"
    # Repeated aggregation buffer names get the suffixes to_python uses.
    assert str(value.field("sum_1").type) == "double"
    assert str(value.field("max_1").type) == "timestamp[us, tz=UTC]"


@pytest.mark.spark
def test_scala_hashmap_order_matches_the_jvm(spark: Any) -> None:
    """ScalaHashMapOrder against a real scala.collection.mutable.HashMap, filled and cleared.

    Integer keys hash to themselves, so any hash (collisions, negatives, growth past 12, a
    table that stays big after clear()) can be tried.
    """
    jvm = spark._jvm
    scala_map = jvm.scala.collection.mutable.HashMap()
    ours = ScalaHashMapOrder()
    rng = random.Random(7)
    for size in (3, 11, 12, 13, 40, 2, 100, 5, 0, 30):
        keys = rng.sample(range(-(2**31), 2**31), size)
        keys[size // 2 : size // 2 + 2] = [k & ~0xFF for k in keys[size // 2 : size // 2 + 2]]
        keys = list(dict.fromkeys(keys))
        for key in keys:
            scala_map.put(jvm.java.lang.Integer(key), "v")
        it = scala_map.keysIterator()
        jvm_order = []
        while it.hasNext():
            jvm_order.append(int(it.next()))
        scala_map.clear()
        assert [keys[i] for i in ours.order(keys)] == jvm_order, f"size {size}"


def test_timers_print_as_timestamps_in_the_session_time_zone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Epoch milliseconds by Spark's contract: text shows the timestamp Spark's show() would
    print in the session time zone; JSON keeps the long Spark's reader gives (toJSON)."""
    args = ["state", TWS, "--read-timers", "--partition", "0"]
    _, out, _ = _run(capsys, *args)
    raw = [json.loads(line)["expiration_timestamp_ms"] for line in out.splitlines()]
    assert raw[0] == 1704070486000
    _, out, _ = _run(capsys, *args, "--format", "table")
    assert out.splitlines()[2].split()[-2:] == ["2024-01-01", "00:54:46"]
    _, out, _ = _run(capsys, *args, "--format", "table", "--time-zone", "America/New_York")
    assert out.splitlines()[2].split()[-2:] == ["2023-12-31", "19:54:46"]
    assert str(raw[0]) not in out
