"""The compiled chain merge (``render_chain`` in ``parsers/_speedups.c``) agrees with Python.

An HDFS store's version is its snapshot with the deltas after it applied in order, last
record winning (``HDFSBackedStateStoreProvider.loadMap``). Python's spec is what
``HdfsStoreReader.load`` does: ``dict.update`` file by file, removed keys left out, then
the JSON lines of the merged pairs in the order keys first appeared. The compiled step must
give the same bytes, raise the same error for a row that does not render, and refuse (None)
exactly the streams the careful parser rejects.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.app.render.bytes_to_json import (
    state_blob_encoder,
    state_chain_encoder,
    state_lines_encoder,
)
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.parsers.hdfs_files import read_records
from stateglass.parsers.sparktypes import AtomicType, StructField, StructType
from stateglass.parsers.unsafewriter import encode_row
from tests.conftest import SAMPLES
from tests.parsers.compiled import Outcome, _damaged, _mutate_row, compiled_speedups, outcome
from tests.parsers.row_strategies import NULLS, SCHEMAS, ZONES, draw_row, struct_types
from tests.parsers.state_encoders import encode_lz4, encode_records

_speedups = compiled_speedups()

Records = list[tuple[bytes, bytes | None]]


@st.composite
def chains(
    draw: st.DrawFn, schemas: st.SearchStrategy[StructType] | None = None
) -> tuple[StructType, StructType, Records | None, list[Records]]:
    """A snapshot (or none) and deltas over a small pool of keys, so that later files
    overwrite, remove and re-add keys of earlier ones."""
    if schemas is None:
        schemas = st.sampled_from(SCHEMAS)
    key_schema, value_schema = draw(schemas), draw(schemas)
    pool = [
        encode_row(key_schema, draw_row(draw, key_schema)) for _ in range(draw(st.integers(1, 6)))
    ]

    def value() -> bytes:
        row = encode_row(value_schema, draw_row(draw, value_schema))
        # Pre-2.3 writers padded values; readers cut them to a multiple of 8.
        return row + draw(st.binary(max_size=7)) if draw(NULLS) else row

    def records(removes: bool) -> Records:
        out: Records = []
        for _ in range(draw(st.integers(0, 6))):
            key = draw(st.sampled_from(pool))
            out.append((key, None if removes and draw(NULLS) else value()))
        return out

    snapshot = records(False) if draw(st.booleans()) else None
    deltas = [records(True) for _ in range(draw(st.integers(0, 4)))]
    return key_schema, value_schema, snapshot, deltas


def python_chain(
    key: StructType,
    value: StructType,
    snapshot: bytes | None,
    deltas: list[bytes],
    pid: int,
    zone: str = "UTC",
) -> Outcome:
    """What the record-by-record path gives for the same files."""

    def run() -> bytes:
        state: dict[bytes, bytes | None] = {}
        if snapshot is not None:
            state.update(read_records(snapshot, allow_deletes=False))
        for delta in deltas:
            state.update(read_records(delta, allow_deletes=True))
        pairs = [(k, v) for k, v in state.items() if v is not None]
        lines = state_lines_encoder(key, value, zone)(pairs, pid)
        return "".join(line + "\n" for line in lines).encode("utf-8")

    return outcome(run)


def compiled_chain(
    key: StructType,
    value: StructType,
    snapshot: bytes | None,
    deltas: list[bytes],
    pid: int,
    zone: str = "UTC",
) -> Outcome:
    chain = state_chain_encoder(key, value, zone)
    assert chain is not None

    def run() -> bytes | None:
        done = chain(snapshot, deltas, pid)
        if done is None:
            return None
        data, rows = done
        assert rows == data.count(b"\n")
        return data

    return outcome(run)


def streams(snapshot: Records | None, deltas: list[Records]) -> tuple[bytes | None, list[bytes]]:
    return (
        encode_records(snapshot) if snapshot is not None else None,
        [encode_records(d) for d in deltas],
    )


@settings(max_examples=150, deadline=None, database=None)
@given(case=chains(), pid=st.integers(0, 2**31 - 1), zone=ZONES)
def test_chain_agrees_on_valid_files(case: Any, pid: int, zone: str) -> None:
    key, value, snapshot, deltas = case
    snap, dels = streams(snapshot, deltas)
    expected = python_chain(key, value, snap, dels, pid, zone)
    assert expected[0] == "ok"
    assert compiled_chain(key, value, snap, dels, pid, zone) == expected


@settings(max_examples=60, deadline=None, database=None)
@given(case=chains(struct_types(rich=True)), zone=ZONES)
def test_chain_agrees_on_random_schemas_of_every_type(case: Any, zone: str) -> None:
    key, value, snapshot, deltas = case
    snap, dels = streams(snapshot, deltas)
    assert compiled_chain(key, value, snap, dels, 0, zone) == python_chain(
        key, value, snap, dels, 0, zone
    )


@settings(max_examples=200, deadline=None, database=None)
@given(case=chains(), data=st.data())
def test_chain_agrees_on_rows_that_do_not_render(case: Any, data: st.DataObject) -> None:
    """A damaged key or value goes back to Python in its place: same bytes or same error."""
    key, value, snapshot, deltas = case
    files = ([snapshot] if snapshot is not None else []) + deltas
    candidates = [(f, i) for f, records in enumerate(files) for i in range(len(records))]
    if not candidates:
        return
    f, i = data.draw(st.sampled_from(candidates))
    kb, vb = files[f][i]
    if vb is not None and data.draw(st.booleans()):
        vb = _mutate_row(vb, data)
    else:
        kb = _mutate_row(kb, data)
    files[f][i] = (kb, vb)
    snap, dels = streams(snapshot, deltas)
    assert compiled_chain(key, value, snap, dels, 7) == python_chain(key, value, snap, dels, 7)


@settings(max_examples=100, deadline=None, database=None)
@given(case=chains(), data=st.data())
def test_chain_refuses_exactly_the_streams_python_rejects(case: Any, data: st.DataObject) -> None:
    key, value, snapshot, deltas = case
    snap, dels = streams(snapshot, deltas)
    if snap is not None and data.draw(st.booleans()):
        snap = _damaged(snap, data)
    elif dels:
        at = data.draw(st.integers(0, len(dels) - 1))
        dels[at] = _damaged(dels[at], data)
    expected = python_chain(key, value, snap, dels, 1)
    got = compiled_chain(key, value, snap, dels, 1)
    files = ([(snap, False)] if snap is not None else []) + [(d, True) for d in dels]
    if any(outcome(read_records, f, allow_deletes=rm)[0] == "error" for f, rm in files):
        assert expected[0] == "error"
        assert got == ("ok", None)  # refused: the careful path names the file
    else:
        assert got == expected


def merged_pairs(snapshot: bytes | None, deltas: list[bytes]) -> Outcome:
    """The live pairs of the record-by-record merge, in the order keys first appeared."""

    def run() -> list[tuple[bytes, bytes]]:
        state: dict[bytes, bytes | None] = {}
        if snapshot is not None:
            state.update(read_records(snapshot, allow_deletes=False))
        for delta in deltas:
            state.update(read_records(delta, allow_deletes=True))
        return [(k, v) for k, v in state.items() if v is not None]

    return outcome(run)


@settings(max_examples=150, deadline=None, database=None)
@given(case=chains(), data=st.data())
def test_chain_columns_are_the_merged_pairs(case: Any, data: st.DataObject) -> None:
    """``chain_columns`` (the SQL catalog's merge): the same pairs as columns, only those
    asked for, or None exactly where the careful parser rejects a file."""
    from stateglass.parsers.state_arrow import _large_binary

    _, _, snapshot, deltas = case
    snap, dels = streams(snapshot, deltas)
    if dels and data.draw(st.booleans()):
        at = data.draw(st.integers(0, len(dels) - 1))
        dels[at] = _damaged(dels[at], data)
    want_keys, want_values = data.draw(st.booleans()), data.draw(st.booleans())
    expected = merged_pairs(snap, dels)
    got = _speedups.chain_columns(snap, dels, want_keys, want_values)
    if expected[0] == "error":
        assert got is None
        return
    assert got is not None
    rows, keys, values = got
    assert rows == len(expected[1])
    for wanted, buffers, side in ((want_keys, keys, 0), (want_values, values, 1)):
        if not wanted:
            assert buffers is None
            continue
        assert buffers is not None
        column = _large_binary(rows, buffers)
        column.validate(full=True)
        assert column.to_pylist() == [pair[side] for pair in expected[1]]


@settings(max_examples=150, deadline=None, database=None)
@given(
    case=chains(),
    sizes=st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=64).map(tuple),
    data=st.data(),
)
def test_chain_values_decoded_as_fields_are_flat_structs_of_the_rows(
    case: Any, sizes: tuple[int, ...], data: st.DataObject
) -> None:
    """With the value rows' field sizes, ``chain_columns`` gives each field's column as
    ``flat_struct`` makes it from the merged values; a live value too short for its fields
    refuses it (None), as ``flat_struct`` refuses the rows (a removed or overwritten one
    does not)."""
    _, _, snapshot, deltas = case
    width = 8 * ((len(sizes) + 63) // 64 + len(sizes))

    def sized(records: Records) -> Records:
        out: Records = []
        for key, value in records:
            if value is not None:
                short = data.draw(st.integers(0, 20)) == 0
                size = data.draw(st.integers(0, width - 1) if short else st.just(width))
                value = data.draw(st.binary(min_size=size, max_size=size))
            out.append((key, value))
        return out

    snap, dels = streams(None if snapshot is None else sized(snapshot), [sized(d) for d in deltas])
    whole = _speedups.chain_columns(snap, dels, False, True)
    assert whole is not None
    rows, _, (offsets, values) = whole
    want = _speedups.flat_struct(offsets, values, 0, rows, sizes)
    got = _speedups.chain_columns(snap, dels, False, True, sizes)
    if want is None:
        assert got is None
        return
    assert got is not None and got[:2] == (rows, None)
    assert [(bytes(v), None if b is None else bytes(b), n, e) for v, b, n, e in got[2]] == [
        (bytes(v), None if b is None else bytes(b), n, e) for v, b, n, e in want
    ]


def test_a_remove_in_a_snapshot_is_refused() -> None:
    key = StructType((StructField("k", AtomicType("string")),))
    snap = encode_records([(encode_row(key, ("a",)), None)])
    assert compiled_chain(key, key, snap, [], 0) == ("ok", None)
    assert python_chain(key, key, snap, [], 0)[0] == "error"


def test_chain_keeps_the_order_keys_first_appeared() -> None:
    key = StructType((StructField("k", AtomicType("string")),))
    value = StructType((StructField("n", AtomicType("long")),))

    def rec(k: str, n: int | None) -> tuple[bytes, bytes | None]:
        return encode_row(key, (k,)), None if n is None else encode_row(value, (n,))

    snap = encode_records([rec("a", 1), rec("b", 2), rec("c", 3)])
    deltas = [
        encode_records([rec("b", None), rec("d", 4), rec("a", 5)]),
        encode_records([rec("b", 6), rec("e", None)]),
    ]
    ok, data = compiled_chain(key, value, snap, deltas, 2)
    assert ok == "ok"
    assert data == (
        b'{"key":{"k":"a"},"value":{"n":5},"partition_id":2}\n'
        b'{"key":{"k":"b"},"value":{"n":6},"partition_id":2}\n'
        b'{"key":{"k":"c"},"value":{"n":3},"partition_id":2}\n'
        b'{"key":{"k":"d"},"value":{"n":4},"partition_id":2}\n'
    )


def test_a_big_chain_grows_its_table() -> None:
    """Tens of thousands of keys: the table grows past its first size and stays exact."""
    key = StructType((StructField("k", AtomicType("long")),))
    value = StructType((StructField("n", AtomicType("long")),))
    snap = encode_records([(encode_row(key, (i,)), encode_row(value, (i,))) for i in range(3000)])
    delta = encode_records(
        [(encode_row(key, (i,)), encode_row(value, (-i,))) for i in range(0, 60_000, 2)]
        + [(encode_row(key, (i,)), None) for i in range(1, 3000, 3)]
    )
    got = compiled_chain(key, value, snap, [delta], 0)
    assert got == python_chain(key, value, snap, [delta], 0)
    # 3,000 snapshot keys and 30,000 even ones (1,500 shared), less 1,000 removed.
    assert got[1].count(b"\n") == 3000 + 30_000 - 1500 - 1000


@settings(max_examples=60, deadline=None, database=None)
@given(
    pool=st.integers(1, 80),
    files=st.lists(
        st.lists(st.tuples(st.integers(0, 79), st.booleans()), max_size=400), min_size=1, max_size=5
    ),
    with_snapshot=st.booleans(),
)
def test_long_chains_with_keys_repeated_close_together(
    pool: int, files: list[list[tuple[int, bool]]], with_snapshot: bool
) -> None:
    """Records are applied some way behind the walk that finds them, their memory fetched
    meanwhile: a key put, removed and put again a few records apart, in one file or across
    two, and a table that grows mid-file, still merge as ``dict.update`` file by file does."""
    key = StructType((StructField("k", AtomicType("long")),))
    value = StructType((StructField("n", AtomicType("long")),))

    def records(spec: list[tuple[int, bool]], removes: bool) -> Records:
        return [
            (encode_row(key, (k % pool,)), None if removes and gone else encode_row(value, (i,)))
            for i, (k, gone) in enumerate(spec)
        ]

    snap, deltas = streams(
        records(files[0], False) if with_snapshot else None,
        [records(spec, True) for spec in files[with_snapshot:]],
    )
    assert compiled_chain(key, value, snap, deltas, 0) == python_chain(key, value, snap, deltas, 0)
    expected = merged_pairs(snap, deltas)
    got = _speedups.chain_columns(snap, deltas, True, True)
    assert got is not None and expected[0] == "ok"
    from stateglass.parsers.state_arrow import _large_binary

    rows, keys, values = got
    assert rows == len(expected[1])
    assert _large_binary(rows, keys).to_pylist() == [k for k, _ in expected[1]]
    assert _large_binary(rows, values).to_pylist() == [v for _, v in expected[1]]


def test_files_that_are_not_bytes_are_a_type_error() -> None:
    key = StructType((StructField("k", AtomicType("string")),))
    chain = state_chain_encoder(key, key, "UTC")
    assert chain is not None
    with pytest.raises(TypeError):
        chain(None, ["not bytes"], 0)  # type: ignore[list-item]


# ------------------------------------------------------------------ real stores on disk


def _hdfs_reader(cp: Path, partition: int = 0) -> tuple[Any, StructType, StructType]:
    source = StateSource(Checkpoint.open(str(cp)), StateRequest())
    codec = source.row_codec
    return source.reader(partition), codec.key_schema, codec.value_schema


def test_a_repeated_key_in_a_snapshot_keeps_its_last_record(tmp_path: Path) -> None:
    """Spark's loadMap keeps a repeated key's last record; both of our paths do too."""
    cp = tmp_path / "agg-hdfs"
    shutil.copytree(SAMPLES / "spark-4.3" / "agg-hdfs", cp)
    reader, key, value = _hdfs_reader(cp)
    records = list(reader.load(12))  # a real snapshot of the real query
    assert len(records) >= 2
    (first_key, _), (_, other_value) = records[0], records[1]
    snapshot = encode_records([*records, (first_key, other_value)])
    (cp / "state" / "0" / "0" / "13.snapshot").write_bytes(encode_lz4(snapshot))
    reader, key, value = _hdfs_reader(cp)
    loaded = list(reader.load(13))
    assert len(loaded) == len(records)
    assert dict(loaded)[first_key] == other_value
    files = reader.chain_data(13)
    assert files is not None
    chain = state_chain_encoder(key, value, "UTC")
    assert chain is not None
    assert chain(files[0], files[1], 0) == state_blob_encoder(key, value, "UTC")(loaded, 0)


def test_a_long_chain_of_big_files_takes_the_record_path() -> None:
    """24 deltas and no snapshot: held at once they are many times the biggest file."""
    reader, _, _ = _hdfs_reader(SAMPLES / "demo" / "snapshot-lag")
    assert reader.chain_data(24) is not None  # small files: under the 64 MiB floor
    assert reader.chain_data(24, hold_min=0) is None
    assert reader.chain_data(1, hold_min=0) is not None  # one file is never too many
