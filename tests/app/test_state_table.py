"""The state browser's tables against the CLI's JSON rows and the change feed.

``stateglass state`` prints, row for row, what Spark's reader returns (the e2e suite checks
that against Spark); here every sample store's browse table must say the same, cell by cell,
and the diff of two consecutive versions must be what the version's change records did.
"""

from __future__ import annotations

import json
import math
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from stateglass.app.browse.cells import cell_text
from stateglass.app.browse.diff import compute_diff, diff_page
from stateglass.app.browse.key_history import find_key_json, find_keys, key_history, numeric_columns
from stateglass.app.browse.store import PartitionCache, iter_partitions
from stateglass.app.browse.table import PageRequest, iter_page, read_page
from stateglass.app.cli import main as cli
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import iter_raw_changes
from stateglass.collectors.checkpoints.state_views import StateView, open_source, versions, views_of
from stateglass.collectors.errors import CheckpointError
from stateglass.parsers.arrow_types import unique_names
from stateglass.parsers.sparktypes import AtomicType, DataType, StructField, StructType
from tests.conftest import SAMPLES, sample_checkpoints


def _views() -> list[Any]:
    out = []
    for cp in sample_checkpoints():
        for store in Checkpoint.open(cp).stores():
            for view in views_of(store, cp):
                name = f"{Path(cp).parent.name}/{Path(cp).name}/{view.label}"
                out.append(pytest.param(view, id=name))
    return out


VIEWS = _views()
INT = AtomicType("integer")
AGG = StateView(str(SAMPLES / "spark-4.3" / "agg-hdfs"))


@pytest.fixture
def cache() -> PartitionCache:
    """A private cache per test, so that no test reads another's partitions."""
    return PartitionCache()


def _loads(text: str) -> Any:
    """JSON with objects as lists of pairs (names repeat in state schemas), numbers exact."""
    return json.loads(text, object_pairs_hook=list, parse_float=Decimal)


def _align(value: Any, dt: DataType) -> Any:
    """Objects of struct type as dicts named like the table's columns.

    Spark leaves null fields out, so a repeated name (``sum``, ``sum``) is told apart by the
    schema: the JSON's fields come in schema order, each matched to the next field so named.
    """
    if not isinstance(dt, StructType) or not isinstance(value, list):
        return value
    names = unique_names(dt.names)
    out: dict[str, Any] = {}
    at = 0
    for name, item in value:
        while dt.fields[at].name != name:
            at += 1
        out[names[at]] = _align(item, dt.fields[at].data_type)
        at += 1
    return out


def cli_rows(view: StateView, version: int, tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    """``stateglass state`` at ``version``, as parsed JSON objects."""
    out = tmp_path / f"state-{version}-{abs(hash(view))}.jsonl"
    args = ["state", view.checkpoint, "--operator", str(view.operator_id)]
    args += ["--store", view.store_name, "--batch-id", str(version - 1), "--jobs", "1"]
    if view.state_var:
        args += ["--state-var", view.state_var]
    if view.read_timers:
        args.append("--read-timers")
    if not view.flatten:
        args.append("--no-flatten")
    assert cli([*args, *extra, "-o", str(out)]) == 0
    columns = open_source(view).row_codec.columns
    row_type = StructType(
        (
            *(StructField(n, dt) for n, dt in columns),
            StructField("partition_id", AtomicType("integer")),
        )
    )
    return [_align(_loads(line), row_type) for line in out.read_text().splitlines()]


def flat_json(row: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    """A JSON row as the table's columns: nested objects walked down to a column's name."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if prefix in columns:
            out[prefix] = value
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            raise AssertionError(f"JSON field {prefix!r} is not a table column")

    walk("", row)
    return out


def same_cell(cell: Any, expected: Any) -> bool:
    """A table cell against the JSON value Spark writes for it."""
    if expected is None:
        return cell is None
    if isinstance(expected, list):  # an array, or a map as its pairs
        return isinstance(cell, str) and _loads(cell) == expected
    if isinstance(cell, float):
        if isinstance(expected, str):  # Spark writes NaN and infinities as strings
            return math.isnan(cell) if expected == "NaN" else cell == float(expected)
        return cell == float(expected)
    if isinstance(cell, Decimal):
        return isinstance(expected, Decimal) and str(cell) == str(expected)
    return cell == expected and type(cell) is type(expected)


def assert_same_rows(table: pa.Table, rows: list[dict[str, Any]]) -> None:
    columns = table.column_names
    got = table.to_pylist()
    assert len(got) == len(rows)
    for n, (cells, row) in enumerate(zip(got, rows, strict=True)):
        expected = flat_json(row, columns)
        for name in columns:
            assert same_cell(cells[name], expected.get(name)), (n, name, cells[name], expected)


@pytest.mark.parametrize("view", VIEWS)
def test_table_equals_cli_rows(view: StateView, tmp_path: Path, cache: PartitionCache) -> None:
    """Every cell of the whole table at the last and a middle version, in the CLI's order."""
    found = versions(view)
    for version in {found[-1], found[len(found) // 2]}:
        # Pages of at most 1,000 rows (the page's cap): the demo stories keep a few thousand.
        first = read_page(PageRequest(view, version, page_size=1000), cache=cache, jobs=1)
        pages = [first.table] + [
            read_page(PageRequest(view, version, page=n, page_size=1000), cache=cache, jobs=1).table
            for n in range(2, -(-first.total // 1000) + 1)
        ]
        table = pa.concat_tables(pages)
        assert first.total == table.num_rows
        assert_same_rows(table, cli_rows(view, version, tmp_path))


def test_pages_partition_filter_and_order(tmp_path: Path, cache: PartitionCache) -> None:
    whole = read_page(PageRequest(AGG, 12, page_size=1000), cache=cache, jobs=1).table
    pages = [
        read_page(PageRequest(AGG, 12, page=n, page_size=4), cache=cache, jobs=1)
        for n in range(1, 6)
    ]
    assert [p.total for p in pages] == [whole.num_rows] * 5
    assert pa.concat_tables([p.table for p in pages]).equals(whole)
    assert pages[-1].table.num_rows == 0  # past the end: an empty page, not an error
    for partition in range(4):
        only = read_page(PageRequest(AGG, 12, partition, page_size=1000), cache=cache, jobs=1)
        rows = [r for r in cli_rows(AGG, 12, tmp_path) if r["partition_id"] == partition]
        assert only.total == len(rows) > 0
        assert_same_rows(only.table, rows)


def _key_texts(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in _key_texts(v)]
    return [str(value)]


@pytest.mark.parametrize(
    ("view", "search"),
    [
        pytest.param(AGG, "GAMMA", id="agg-upper-case"),
        pytest.param(AGG, "00:50:00", id="agg-timestamp"),
        pytest.param(AGG, "no such key", id="agg-none"),
        pytest.param(
            StateView(str(SAMPLES / "spark-4.3" / "agg-rocks-cl")), "Gamma", id="agg-rocksdb"
        ),
        pytest.param(
            StateView(str(SAMPLES / "spark-4.3" / "tws-rocks-cl"), state_var="stats"),
            "USER0",
            id="tws-value-state",
        ),
        pytest.param(
            StateView(str(SAMPLES / "spark-4.3" / "tws-rocks-cl"), state_var="by_kind"),
            "CLICK",
            id="tws-map-user-key",
        ),
        pytest.param(
            StateView(str(SAMPLES / "spark-4.3" / "tws-rocks-cl"), state_var="recent"),
            "user1",
            id="tws-list",
        ),
    ],
)
def test_search_matches_key_values(
    view: StateView, search: str, tmp_path: Path, cache: PartitionCache
) -> None:
    version = versions(view)[-1]
    got = read_page(PageRequest(view, version, search=search, page_size=1000), cache=cache)
    key_columns = {"key", "user_map_key"}
    expected = [
        row
        for row in cli_rows(view, version, tmp_path)
        if any(
            search.lower() in t.lower()
            for name in key_columns & set(row)
            for t in _key_texts(row[name])
        )
    ]
    assert got.total == len(expected)
    assert_same_rows(got.table, expected)


def test_first_page_comes_before_the_last_partition(cache: PartitionCache) -> None:
    updates = list(iter_page(PageRequest(AGG, 12, page_size=2), cache=cache, jobs=1))
    early = [u for u in updates if u.table is not None and u.total is None]
    assert early and early[0].partitions_done < early[0].partitions_total
    assert early[0].table.equals(updates[-1].table)
    assert updates[-1].total == updates[-1].rows_seen == 14
    assert [u.partitions_done for u in updates] == [0, 1, 2, 3, 4, 4]


def test_worker_processes_read_the_same(cache: PartitionCache) -> None:
    """Forked workers (RocksDB restores included) give what one process reads."""
    view = StateView(str(SAMPLES / "spark-4.3" / "agg-rocks-cl"))
    serial = read_page(PageRequest(view, 12, page_size=1000), cache=PartitionCache(), jobs=1)
    forked = read_page(PageRequest(view, 12, page_size=1000), cache=cache, jobs=2)
    assert forked.table.equals(serial.table) and forked.total == 14


def test_cache_is_bounded_and_least_recently_used_goes() -> None:
    probe = PartitionCache()
    list(iter_partitions(AGG, 12, [0], cache=probe, jobs=1))
    one = probe.stats()[1]
    small = PartitionCache(max_bytes=3 * one)
    for version in (10, 11, 12):
        list(iter_partitions(AGG, version, [0], cache=small, jobs=1))
    list(iter_partitions(AGG, 10, [0], cache=small, jobs=1))  # used again: stays
    list(iter_partitions(AGG, 9, [0], cache=small, jobs=1))
    assert small.stats()[1] <= small.max_bytes
    assert small.get((AGG, 10, 0)) is not None and small.get((AGG, 9, 0)) is not None
    assert small.get((AGG, 11, 0)) is None


# ---- diff ----------------------------------------------------------------------------------


def _change_views() -> list[Any]:
    """Views with a change feed: HDFS deltas, RocksDB changelogs (not timers, as in Spark)."""
    out = []
    for param in VIEWS:
        view = param.values[0]
        provider = Checkpoint.open(view.checkpoint).store(view.operator_id, view.store_name)
        name = Path(view.checkpoint).name
        if view.read_timers or (provider.provider == "rocksdb" and not name.endswith("-cl")):
            continue
        out.append(param)
    return out


@pytest.mark.parametrize("view", _change_views())
def test_diff_is_what_the_change_feed_did(view: StateView, cache: PartitionCache) -> None:
    """Consecutive versions: replay version V's change records on V - 1's stored items."""
    keyed = view.keyed(open_source(view).row_codec)
    source = open_source(keyed)
    codec = source.row_codec
    found = versions(view)
    # The last five steps: RocksDB restores make each version cost tens of milliseconds.
    for after in found[-5:]:
        before = after - 1
        held = source.partitions_for(after - 1)
        if held != source.partitions_for(before - 1):
            continue  # a repartition: keys moved, and it wrote no change records
        result = compute_diff(view, before, after, cache=cache, jobs=1)
        expected = {"added": 0, "removed": 0, "changed": 0}
        for partition in held:
            old = {k: v for k, v in source.reader(partition).load(before) if codec.rows(k, v)}
            new = dict(old)
            one = source.__class__(source.cp, keyed.request([partition]))
            for _, kind, _, key, value in iter_raw_changes(one, before, before):
                if not codec.decode_change(kind, key, value):
                    continue  # another state variable's column family
                if kind == "delete":
                    new.pop(key, None)
                elif kind == "append" and key in new:
                    assert value is not None
                    new[key] = new[key] + source.merge_delimiter + value
                else:
                    assert value is not None
                    new[key] = value
            expected["added"] += len(new.keys() - old.keys())
            expected["removed"] += len(old.keys() - new.keys())
            expected["changed"] += sum(1 for k in new.keys() & old.keys() if new[k] != old[k])
            part = next(p for p in result.parts if p.after.partition == partition)
            assert {part.after.keys[int(i)].as_py() for i in part.added} == new.keys() - old.keys()
            assert {part.before.keys[int(i)].as_py() for i in part.removed} == (
                old.keys() - new.keys()
            )
        assert result.counts == expected, (before, after)


def test_diff_pages_show_before_and_after(tmp_path: Path, cache: PartitionCache) -> None:
    result = compute_diff(AGG, 11, 12, cache=cache, jobs=1)
    assert result.counts["removed"] > 0 and result.counts["changed"] > 0
    old_rows, new_rows = cli_rows(AGG, 11, tmp_path), cli_rows(AGG, 12, tmp_path)

    def by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {json.dumps(r["key"], sort_keys=True, default=str): r for r in rows}

    old, new = by_key(old_rows), by_key(new_rows)
    removed = diff_page(result, "removed", 1, 1000)
    assert removed.num_rows == result.counts["removed"]
    gone = old.keys() - new.keys()
    # With the values they had in the older version. Their order is that of the change
    # records naming them, not the store's: compared sorted by key.
    cols = [c for c in removed.column_names if c == "key" or c.startswith("key.")]
    got = sorted(removed.to_pylist(), key=lambda r: json.dumps([r[c] for c in cols]))
    expected = sorted(
        (r for r in old_rows if json.dumps(r["key"], sort_keys=True, default=str) in gone),
        key=lambda r: json.dumps([flat_json(r, removed.column_names).get(c) for c in cols]),
    )
    assert_same_rows(pa.Table.from_pylist(got, schema=removed.schema), expected)
    changed = diff_page(result, "changed", 1, 1000).to_pylist()
    key_type = open_source(AGG).row_codec.key_schema

    def text_key(text: str) -> str:
        return json.dumps(_align(_loads(text), key_type), sort_keys=True, default=str)

    keys_changed = {text_key(c["key"]) for c in changed}
    assert len(keys_changed) == result.counts["changed"]
    for change in changed:
        k = text_key(change["key"])
        columns = [change["field"]]
        before = flat_json(old[k], columns + _all_columns(old[k])).get(change["field"])
        after = flat_json(new[k], columns + _all_columns(new[k])).get(change["field"])
        assert before != after
        assert same_text(change["before"], before) and same_text(change["after"], after)
    # Page two of one key per page is the second key.
    assert diff_page(result, "removed", 2, 1).to_pylist() == removed.slice(1, 1).to_pylist()


def _all_columns(row: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k, v in row.items():
        name = f"{prefix}{k}"
        out += _all_columns(v, name + ".") if isinstance(v, dict) else [name]
    return out


def same_text(text: str | None, expected: Any) -> bool:
    if expected is None:
        return text is None
    if isinstance(expected, list):
        return text is not None and _loads(text) == expected
    if isinstance(expected, Decimal):
        # JSON numbers parse as Decimal; a double shows rounded to 15 digits (cell_text).
        return text is not None and text in (str(expected), cell_text(float(expected)))
    return text == str(expected)


# ---- key history ---------------------------------------------------------------------------


def test_key_history_against_each_version(tmp_path: Path, cache: PartitionCache) -> None:
    found = versions(AGG)
    refs = find_keys(AGG, found[-1], "gamma", limit=50, cache=cache, jobs=1)
    assert refs and all("gamma" in r.label.lower() for r in refs)
    ref = refs[0]
    table = key_history(AGG, ref, found, cache=cache)
    assert table.column("version").to_pylist() == found
    assert table.column("batch_id").to_pylist() == [v - 1 for v in found]
    statuses = table.column("status").to_pylist()
    assert "absent" in statuses and statuses[-1] != "absent"
    wanted = _align(_loads(ref.label), open_source(AGG).row_codec.key_schema)
    value_columns = [c for c in table.column_names if c.startswith("value.")]
    previous = None
    for version, cells in zip(found, table.to_pylist(), strict=True):
        rows = [r for r in cli_rows(AGG, version, tmp_path) if r["key"] == wanted]
        assert len(rows) <= 1
        if not rows:
            assert cells["status"] in ("absent", "removed")
            assert all(cells[c] is None for c in value_columns)
        else:
            expected = flat_json({"value": rows[0]["value"]}, value_columns)
            for c in value_columns:
                assert same_cell(cells[c], expected.get(c)), (version, c)
            if previous is not None:
                same = previous == rows[0]["value"]
                assert cells["status"] == ("unchanged" if same else "changed")
        previous = rows[0]["value"] if rows else None
    assert "value.count" in numeric_columns(table)


def test_key_found_by_pasted_json(cache: PartitionCache) -> None:
    view = StateView(str(SAMPLES / "spark-4.3" / "tws-rocks-cl"), state_var="by_kind")
    found = versions(view)
    ref = find_keys(view, found[-1], "", limit=3, cache=cache, jobs=1)[2]
    pretty = json.dumps(json.loads(ref.label), indent=2)
    assert find_key_json(view, found, pretty, cache=cache, jobs=1) == ref
    assert find_key_json(view, found, '{"key":{"user":"nobody"}}', cache=cache, jobs=1) is None


# ---- bad input -----------------------------------------------------------------------------


def test_a_corrupt_file_is_one_line_naming_it(tmp_path: Path, cache: PartitionCache) -> None:
    copy = tmp_path / "agg-hdfs"
    shutil.copytree(AGG.checkpoint, copy)
    # Version 11 is snapshot 9 plus deltas 10 and 11 (12 has a snapshot of its own).
    delta = copy / "state" / "0" / "1" / "11.delta"
    delta.write_bytes(delta.read_bytes()[:20])
    view = StateView(str(copy))
    with pytest.raises(CheckpointError) as info:
        read_page(PageRequest(view, 11), cache=cache, jobs=1)
    message = str(info.value)
    assert "\n" not in message and str(delta) in message
