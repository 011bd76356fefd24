"""The RocksDB writing side against Spark's own bytes, without a JVM.

Every RocksDB store without column families in the corpus of real checkpoints (3.5 to 4.3:
aggregation, dedup, windowed aggregation, session windows with their prefix-scan keys,
flatMapGroupsWithState, the four stores of a join, row checksums) is read at its last
committed batch; its rows go to the neutral form and back and must come out as the very bytes
Spark stored. Then the writer writes the partition, and StateGlass's reader reads the new
directory back: the same rows, and a zip that looks like Spark's.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.errors import RewriteRefused
from stateglass.collectors.fs import LOCAL
from stateglass.collectors.rewrite import WriteTarget, writer_class
from stateglass.collectors.rewrite.rocksdb import RocksDBStoreWriter
from stateglass.collectors.rewrite.rocksdb_rows import RocksDBRows, neutral_rows, store_layout
from stateglass.collectors.rewrite.rocksdb_writer import RocksDBTarget, write_partition
from stateglass.collectors.stores.base import StoreContext
from stateglass.collectors.stores.rocksdb import RocksDBStoreReader
from stateglass.parsers.checksums import verify_spark
from stateglass.parsers.errors import ChecksumMismatch
from stateglass.parsers.rocksdb_encoding import decode_value, encode_value

SCENARIOS = [
    "3.5.9/agg-rocks",
    "3.5.9/dedupnowm-rocks-cl",
    "3.5.9/session-rocks-cl",
    "3.5.9b/join-rocks-cl",
    "3.5.9c/fmgws-rocks-cl",
    "4.0.5/winagg-rocks-cl",
    "4.3.0/agg-rocks-cl",
    "4.3.0/session-rocks-cl",
    "4.3.0/join-rocks-cl",
    "4.3.0-rowck/agg-rocks-cl",
]


def _stores(cp: Checkpoint) -> list[tuple[int, str]]:
    return [(s.operator_id, s.store_name) for s in cp.stores() if "rocksdb" in s.provider.lower()]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_neutral_rows_give_back_sparks_bytes(
    fixture_corpus: Path, tmp_path: Path, scenario: str
) -> None:
    cp = Checkpoint.open(str(fixture_corpus / scenario / "checkpoint"))
    batch = cp.last_committed_batch
    assert batch is not None
    stores = _stores(cp)
    assert stores, f"{scenario} has no RocksDB store"
    for operator_id, store_name in stores:
        source = StateSource(cp, StateRequest(operator_id, store_name, batch_id=batch))
        where = cp.store_dir(operator_id, 0, store_name)
        codec = RocksDBRows(store_layout(source.store, where), row_checksum=source.row_checksum)
        for partition in source.partitions:
            raw = sorted(source.load(partition, batch + 1))
            neutral = [codec.to_neutral(k, v) for k, v in raw]
            assert [codec.to_rocksdb(k, v) for k, v in neutral] == raw

            store_dir = tmp_path / scenario / str(operator_id) / str(partition) / store_name
            target = RocksDBTarget(
                str(store_dir), batch + 1, codec.layout, row_checksum=source.row_checksum
            )
            written = write_partition(target, neutral)
            assert written[-1] == str(store_dir / f"{batch + 1}.zip")
            reader = RocksDBStoreReader(
                StoreContext(LOCAL, str(store_dir), row_checksum=source.row_checksum)
            )
            assert sorted(reader.load(batch + 1)) == raw
            meta = reader.zip_metadata(batch + 1)
            assert meta is not None and meta.num_keys == len(raw)
            assert {f"SSTs/{s.dfs_sst_file_name}" for s in meta.sst_files} == {
                str(Path(p).relative_to(store_dir)) for p in written[:-1]
            }


def test_zip_holds_what_sparks_holds(tmp_path: Path, fixture_corpus: Path) -> None:
    """RocksDB's own checkpoint files and Spark's metadata; nothing of rocksdict's."""
    cp = Checkpoint.open(str(fixture_corpus / "4.3.0/agg-rocks/checkpoint"))
    source = StateSource(cp, StateRequest(batch_id=cp.last_committed_batch))
    codec = RocksDBRows(store_layout(source.store, "agg"))
    rows = [codec.to_neutral(k, v) for k, v in source.load(0, 1)]
    written = write_partition(RocksDBTarget(str(tmp_path), 9, codec.layout), rows)
    with zipfile.ZipFile(written[-1]) as archive:
        names = sorted(archive.namelist())
        lines = archive.read("metadata").decode().split("\n")
    assert [n.split("-")[0] for n in names if not n.endswith(".log")] == [
        "CURRENT",
        "MANIFEST",
        "OPTIONS",
        "metadata",
    ]
    assert lines[0] == "v1"
    assert list(json.loads(lines[1])) == [
        "sstFiles",
        "numKeys",
        "numInternalKeys",
        "columnFamilyMapping",
        "columnFamilyTypeMap",
        "maxColumnFamilyId",
    ]


def test_empty_partition_is_a_version_with_no_keys(tmp_path: Path) -> None:
    from stateglass.parsers.sparktypes import parse_datatype

    schema = parse_datatype(
        '{"type":"struct","fields":[{"name":"k","type":"long","nullable":true,"metadata":{}}]}'
    )
    from stateglass.parsers.rocksdb_encoding import NoPrefixLayout

    written = write_partition(RocksDBTarget(str(tmp_path), 4, NoPrefixLayout(schema)), [])
    assert written == [str(tmp_path / "4.zip")]
    reader = RocksDBStoreReader(StoreContext(LOCAL, str(tmp_path)))
    assert list(reader.load(4)) == []
    meta = reader.zip_metadata(4)
    assert meta is not None and meta.num_keys == 0 and meta.sst_files == ()


def test_row_checksum_covers_the_key() -> None:
    value = encode_value(b"ROW", row_checksum=True, full_key=b"\x00KEY")
    assert decode_value(value, row_checksum=True, full_key=b"\x00KEY") == b"ROW"
    with pytest.raises(ChecksumMismatch):
        decode_value(value, row_checksum=True, full_key=b"\x00KEX")


def test_column_family_stores_have_no_key_layout(fixture_corpus: Path) -> None:
    cp = Checkpoint.open(str(fixture_corpus / "4.3.0/tws-rocks-cl/checkpoint"))
    store = cp.stores()[0]
    with pytest.raises(RewriteRefused) as info:
        store_layout(store, "state/0/0")
    assert "virtual column families" in str(info.value)
    assert "\n" not in str(info.value)


def test_registered_writer_refuses_or_writes(fixture_corpus: Path, tmp_path: Path) -> None:
    tws = Checkpoint.open(str(fixture_corpus / "4.3.0/tws-rocks-cl/checkpoint")).stores()[0]
    assert RocksDBStoreWriter.refusal(tws) is None
    why = RocksDBStoreWriter.refusal(replace(tws, operator_name="symmetricHashJoin"))
    assert why is not None and "join state formats 3 and 4" in why

    cp = Checkpoint.open(str(fixture_corpus / "4.3.0/session-rocks-cl/checkpoint"))
    batch = cp.last_committed_batch
    assert batch is not None
    source = StateSource(cp, StateRequest(batch_id=batch))
    assert RocksDBStoreWriter.refusal(source.store) is None
    raw = sorted(source.load(0, batch + 1))
    rows = list(neutral_rows(source.store, raw, row_checksum=False, where="session"))
    target = WriteTarget(
        str(tmp_path), batch + 1, 0, source.store, unique_id="u-1", file_checksum=True
    )
    writer = writer_class("rocksdb")()
    written = writer.write_partition(target, rows)
    zip_name = f"{batch + 1}_u-1.zip"
    assert [Path(p).name for p in written[-2:]] == [f"{zip_name}.crc", zip_name]
    crc = verify_spark(
        (tmp_path / zip_name).read_bytes(), (tmp_path / f"{zip_name}.crc").read_bytes()
    )
    assert crc is None
    reader = RocksDBStoreReader(StoreContext(LOCAL, str(tmp_path), unique_ids={batch + 1: "u-1"}))
    assert sorted(reader.load(batch + 1)) == raw
