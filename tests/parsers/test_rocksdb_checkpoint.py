"""Tests for parsers.rocksdb_zip: the zip's ``metadata`` entry and zip entry names."""

from __future__ import annotations

import contextlib
import json
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.errors import CorruptData, ParseError, Truncated, UnsupportedFormat
from stateglass.parsers.rocksdb_zip import (
    METADATA_ENTRY,
    LogFile,
    RocksDBCheckpointMetadata,
    SstFile,
    check_zip_entries,
)
from tests.parsers.corpus_files import files

META_3X = (
    b'v1\n{"sstFiles":[{"localFileName":"000030.sst","dfsSstFileName":"000030-e6b8.sst",'
    b'"sizeBytes":1457}],"numKeys":6}'
)
META_4X = (
    b'v1\n{"sstFiles":[],"logFiles":[{"localFileName":"000040.log",'
    b'"dfsLogFileName":"000040-ab.log","sizeBytes":0}],"numKeys":44,"numInternalKeys":60,'
    b'"columnFamilyMapping":{"default":1,"$ttl_x":2},'
    b'"columnFamilyTypeMap":{"default":false,"$ttl_x":true},"maxColumnFamilyId":2}'
)


@pytest.mark.parametrize("path", files(r".*/state/.*/\d+(_[0-9a-f-]+)?\.zip"))
def test_corpus_zip_metadata(fixture_corpus: Path, path: str) -> None:
    zip_path = fixture_corpus / path
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        check_zip_entries(names)
        meta = RocksDBCheckpointMetadata.from_bytes(archive.read(METADATA_ENTRY))
    assert {"CURRENT", METADATA_ENTRY} <= set(names)
    store_dir = zip_path.parent
    for sst in meta.sst_files:
        assert (store_dir / "SSTs" / sst.dfs_sst_file_name).stat().st_size == sst.size_bytes
    spark3 = path.startswith("3.5.9")
    assert (meta.num_internal_keys is None) is spark3
    assert (meta.column_family_mapping is None) is spark3
    if meta.uses_column_families:
        assert meta.column_family_type_map is not None
        assert set(meta.column_family_mapping or {}) == set(meta.column_family_type_map)
        assert max((meta.column_family_mapping or {}).values()) <= (meta.max_column_family_id or 0)


def test_spark3_metadata() -> None:
    meta = RocksDBCheckpointMetadata.from_bytes(META_3X)
    assert meta.sst_files == (SstFile("000030.sst", "000030-e6b8.sst", 1457),)
    assert meta.log_files == ()
    assert meta.num_keys == 6
    assert meta.num_internal_keys is None
    assert not meta.uses_column_families
    assert meta.copy_plan() == (("SSTs/000030-e6b8.sst", "000030.sst"),)


def test_spark4_metadata() -> None:
    meta = RocksDBCheckpointMetadata.from_bytes(META_4X)
    assert meta.log_files == (LogFile("000040.log", "000040-ab.log", 0),)
    assert meta.num_internal_keys == 60
    assert meta.column_family_mapping == {"default": 1, "$ttl_x": 2}
    assert meta.column_family_names() == {1: "default", 2: "$ttl_x"}
    assert meta.is_internal("$ttl_x") and not meta.is_internal("default")
    assert meta.max_column_family_id == 2
    assert meta.uses_column_families
    assert meta.copy_plan() == (("logs/000040-ab.log", "archive/000040.log"),)


def test_empty_column_family_fields_mean_no_prefix() -> None:
    data = b'v1\n{"sstFiles":[],"numKeys":0,"numInternalKeys":0,"columnFamilyMapping":{},' + (
        b'"columnFamilyTypeMap":{},"maxColumnFamilyId":0}'
    )
    meta = RocksDBCheckpointMetadata.from_bytes(data)
    assert not meta.uses_column_families
    assert meta.column_family_names() == {}


def _meta(**fields: object) -> bytes:
    body: dict[str, object] = {"sstFiles": [], "numKeys": 0}
    body.update(fields)
    return b"v1\n" + json.dumps(body).encode()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(b"v2\n{}", UnsupportedFormat, id="v2"),
        pytest.param(b"v99\n{}", UnsupportedFormat, id="v99"),
        pytest.param(b"", Truncated, id="empty"),
        pytest.param(b"v1", Truncated, id="no-json"),
        pytest.param(b"v1\n{", CorruptData, id="bad-json"),
        pytest.param(_meta(sstFiles={}), CorruptData, id="ssts-not-list"),
        pytest.param(_meta(sstFiles=[{"localFileName": "a.sst"}]), CorruptData, id="sst-fields"),
        pytest.param(
            _meta(sstFiles=[{"localFileName": "../x", "dfsSstFileName": "a", "sizeBytes": 1}]),
            CorruptData,
            id="sst-path-traversal",
        ),
        pytest.param(
            _meta(sstFiles=[{"localFileName": "a", "dfsSstFileName": "b/c", "sizeBytes": 1}]),
            CorruptData,
            id="dfs-name-with-slash",
        ),
        pytest.param(
            _meta(sstFiles=[{"localFileName": "a", "dfsSstFileName": "b", "sizeBytes": -1}]),
            CorruptData,
            id="negative-size",
        ),
        pytest.param(_meta(numKeys="6"), CorruptData, id="string-num-keys"),
        pytest.param(_meta(columnFamilyMapping={"a": True}), CorruptData, id="bool-cf-id"),
        pytest.param(_meta(columnFamilyTypeMap={"a": 1}), CorruptData, id="int-cf-flag"),
        pytest.param(_meta(columnFamilyMapping=[]), CorruptData, id="mapping-not-object"),
    ],
)
def test_bad_metadata(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        RocksDBCheckpointMetadata.from_bytes(data)


@pytest.mark.parametrize(
    "names",
    [
        ["CURRENT", "MANIFEST-000005", "OPTIONS-000007", "000004.log", "metadata"],
        ["dir/file", "a..b", "...", "./x"],
        [],
    ],
)
def test_safe_zip_entries(names: list[str]) -> None:
    check_zip_entries(names)


@pytest.mark.parametrize(
    "name",
    ["/etc/passwd", "../x", "a/../../x", "..", "C:evil", "c:/x", "a\\b", "..\\x", "", "a\0b"],
)
def test_unsafe_zip_entries(name: str) -> None:
    with pytest.raises(CorruptData, match="unsafe zip entry"):
        check_zip_entries(["CURRENT", name])


@settings(max_examples=300, deadline=None)
@given(
    sample=st.sampled_from([META_3X, META_4X]),
    cut=st.integers(0, 400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 7)), max_size=4),
)
def test_fuzz_only_parse_errors_escape(sample: bytes, cut: int, flips: list) -> None:
    mutated = bytearray(sample[:cut])
    for position, bit in flips:
        if mutated:
            mutated[position % len(mutated)] ^= 1 << bit
    with contextlib.suppress(ParseError):
        RocksDBCheckpointMetadata.from_bytes(bytes(mutated))


@given(st.lists(st.text(max_size=12), max_size=6))
def test_zip_check_only_raises_corrupt_data(names: list[str]) -> None:
    try:
        check_zip_entries(names)
    except CorruptData:
        return
    for name in names:
        assert name and not name.startswith("/") and "\\" not in name
        assert ".." not in name.split("/")
