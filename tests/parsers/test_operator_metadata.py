"""Tests for parsers.operator_metadata (``_metadata/metadata`` v1 and ``_metadata/v2/<b>``)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.errors import CorruptData, ParseError, Truncated, UnsupportedFormat
from stateglass.parsers.operator_metadata import OperatorMetadata, StoreInfo
from tests.parsers.corpus_files import files

KNOWN_OPERATORS = {
    "stateStoreSave",
    "dedupe",
    "dedupeWithinWatermark",
    "symmetricHashJoin",
    "sessionWindowStateStoreSaveExec",
    "flatMapGroupsWithState",
    "transformWithStateExec",
}
JOIN_STORES = (
    "left-keyToNumValues",
    "left-keyWithIndexToValue",
    "right-keyToNumValues",
    "right-keyWithIndexToValue",
)


def metadata(version: int, body: object) -> bytes:
    return f"v{version}\n{json.dumps(body)}".encode()


V1_BODY = {
    "operatorInfo": {"operatorId": 3, "operatorName": "dedupe"},
    "stateStoreInfo": [{"storeName": "default", "numColsPrefixKey": 0, "numPartitions": 5}],
}


@pytest.mark.parametrize("path", files(r".*/state/\d+/_metadata/(metadata|v2/\d+)"))
def test_corpus_operator_metadata(fixture_corpus: Path, path: str) -> None:
    meta = OperatorMetadata.from_bytes((fixture_corpus / path).read_bytes())
    assert meta.format_version == (2 if "/v2/" in path else 1)
    assert meta.operator_id == int(path.split("/state/")[1].split("/")[0])
    assert meta.operator_name in KNOWN_OPERATORS
    assert all(s.num_partitions == 2 for s in meta.stores)
    if meta.format_version == 2:
        (store,) = meta.stores
        assert store.state_schema_file_paths
        assert all("/_stateSchema/default/" in p for p in store.state_schema_file_paths)
        assert meta.operator_properties is not None


def test_join_v1_stores(fixture_corpus: Path) -> None:
    path = fixture_corpus / "4.0.5/join-hdfs/checkpoint/state/0/_metadata/metadata"
    meta = OperatorMetadata.from_bytes(path.read_bytes())
    assert meta.operator_name == "symmetricHashJoin"
    assert tuple(s.store_name for s in meta.stores) == JOIN_STORES
    assert meta.operator_properties is None


def test_session_window_prefix_columns(fixture_corpus: Path) -> None:
    path = fixture_corpus / "4.0.5/session-rocks-cl/checkpoint/state/0/_metadata/metadata"
    meta = OperatorMetadata.from_bytes(path.read_bytes())
    assert meta.store("default") == StoreInfo("default", 1, 2)
    with pytest.raises(KeyError):
        meta.store("left-keyToNumValues")


def test_transform_with_state_v2(fixture_corpus: Path) -> None:
    path = fixture_corpus / "4.3.0/tws-rocks-cl/checkpoint/state/0/_metadata/v2/0"
    meta = OperatorMetadata.from_bytes(path.read_bytes())
    assert (meta.format_version, meta.operator_id, meta.operator_name) == (
        2,
        0,
        "transformWithStateExec",
    )
    (store,) = meta.stores
    assert store.state_schema_file_paths[0].endswith(
        "/state/0/_stateSchema/default/0_f0f9d93e-9e4c-426f-9b04-cee2eeac9993"
    )
    assert meta.operator_properties is not None
    assert meta.operator_properties["timeMode"] == "ProcessingTime"
    kinds = {
        v["stateName"]: v["stateVariableType"] for v in meta.operator_properties["stateVariables"]
    }
    assert kinds["listState"] == "ListState"
    assert kinds["$procTimers_keyToTimestamp"] == "TimerState"


def test_join_v4_operator_properties(fixture_corpus: Path) -> None:
    directory = fixture_corpus / "4.3.0-joinv4/join-rocks-cl/checkpoint/state/0/_metadata/v2"
    path = min((p for p in directory.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    meta = OperatorMetadata.from_bytes(path.read_bytes())
    assert meta.operator_name == "symmetricHashJoin"
    assert meta.operator_properties == {"useVirtualColumnFamilies": True}


def test_v1_synthetic() -> None:
    meta = OperatorMetadata.from_bytes(metadata(1, V1_BODY))
    assert meta == OperatorMetadata(1, 3, "dedupe", (StoreInfo("default", 0, 5),), None)


def test_v2_accepts_single_schema_path() -> None:
    body = dict(V1_BODY, operatorPropertiesJson="{}")
    body["stateStoreInfo"] = [
        {
            "storeName": "default",
            "numColsPrefixKey": 0,
            "numPartitions": 1,
            "stateSchemaFilePath": "file:/s/0_a",
        }
    ]
    meta = OperatorMetadata.from_bytes(metadata(2, body))
    assert meta.stores[0].state_schema_file_paths == ("file:/s/0_a",)
    assert meta.operator_properties == {}


def test_missing_num_cols_prefix_key_defaults_to_zero() -> None:
    body = dict(V1_BODY, stateStoreInfo=[{"storeName": "default", "numPartitions": 1}])
    assert OperatorMetadata.from_bytes(metadata(1, body)).stores[0].num_cols_prefix_key == 0


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(metadata(99, V1_BODY), UnsupportedFormat, id="newer-version"),
        pytest.param(b"", Truncated, id="empty"),
        pytest.param(b"v1", Truncated, id="no-json"),
        pytest.param(b"v1\n{", CorruptData, id="bad-json"),
        pytest.param(b"1\n{}", CorruptData, id="no-v"),
        pytest.param(metadata(1, {"stateStoreInfo": []}), CorruptData, id="no-operator-info"),
        pytest.param(
            metadata(1, {"operatorInfo": {"operatorId": 0, "operatorName": "x"}}),
            CorruptData,
            id="no-stores",
        ),
        pytest.param(
            metadata(1, dict(V1_BODY, operatorInfo={"operatorId": "0", "operatorName": "x"})),
            CorruptData,
            id="string-operator-id",
        ),
        pytest.param(
            metadata(2, dict(V1_BODY, operatorPropertiesJson="{nope")),
            CorruptData,
            id="bad-properties-json",
        ),
        pytest.param(
            metadata(2, dict(V1_BODY, operatorPropertiesJson=["x"])),
            CorruptData,
            id="properties-not-a-string",
        ),
        pytest.param(
            metadata(
                2,
                dict(
                    V1_BODY,
                    stateStoreInfo=[
                        {"storeName": "d", "numPartitions": 1, "stateSchemaFilePaths": "p"}
                    ],
                ),
            ),
            CorruptData,
            id="paths-not-a-list",
        ),
        pytest.param(metadata(1, dict(V1_BODY, stateStoreInfo=[{}])), CorruptData, id="bad-store"),
    ],
)
def test_bad_operator_metadata(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        OperatorMetadata.from_bytes(data)


@settings(max_examples=300, deadline=None)
@given(
    cut=st.integers(0, 400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 7)), max_size=4),
)
def test_fuzz_only_parse_errors_escape(cut: int, flips: list) -> None:
    sample = metadata(2, dict(V1_BODY, operatorPropertiesJson='{"timeMode":"None"}'))
    mutated = bytearray(sample[:cut])
    for position, bit in flips:
        if mutated:
            mutated[position % len(mutated)] ^= 1 << bit
    with contextlib.suppress(ParseError):
        OperatorMetadata.from_bytes(bytes(mutated))
