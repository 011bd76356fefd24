"""Operator metadata: ``state/<op>/_metadata/metadata`` (v1) and ``_metadata/v2/<batchId>`` (v2).

Text: a ``v1``/``v2`` line, then one json4s JSON document::

    v1
    {"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},
     "stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":2}]}

v2 adds ``stateSchemaFilePaths`` to each store (an array in released Spark; older source
wrote one ``stateSchemaFilePath`` string — both are accepted) and ``operatorPropertiesJson``,
a JSON document inside a JSON string.

Example::

    >>> meta = OperatorMetadata.from_bytes(
    ...     b'v1\\n{"operatorInfo":{"operatorId":0,"operatorName":"dedupe"},'
    ...     b'"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":2}]}'
    ... )
    >>> meta.operator_name, meta.stores[0].num_partitions
    ('dedupe', 2)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stateglass.parsers.errors import CorruptData
from stateglass.parsers.logs import json_int, json_object, json_str, load_json, versioned_json

OPERATOR_METADATA_MAX_VERSION = 2


@dataclass(frozen=True)
class StoreInfo:
    """One state store of the operator (``default``, or e.g. ``left-keyToNumValues``)."""

    store_name: str
    num_cols_prefix_key: int
    num_partitions: int
    state_schema_file_paths: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, obj: Any) -> StoreInfo:
        what = "operator metadata stateStoreInfo"
        info = json_object(obj, what)
        paths: tuple[str, ...] = ()
        if info.get("stateSchemaFilePaths") is not None:
            many = info["stateSchemaFilePaths"]
            if not isinstance(many, list) or not all(isinstance(p, str) for p in many):
                raise CorruptData(f"{what}: stateSchemaFilePaths must be a list of strings")
            paths = tuple(many)
        elif info.get("stateSchemaFilePath") is not None:
            paths = (json_str(info, "stateSchemaFilePath", what),)
        return cls(
            store_name=json_str(info, "storeName", what),
            num_cols_prefix_key=json_int(info, "numColsPrefixKey", what, default=0),
            num_partitions=json_int(info, "numPartitions", what),
            state_schema_file_paths=paths,
        )


@dataclass(frozen=True)
class OperatorMetadata:
    """What Spark records about one stateful operator."""

    format_version: int
    operator_id: int
    operator_name: str
    stores: tuple[StoreInfo, ...]
    operator_properties: Mapping[str, Any] | None = None

    @classmethod
    def from_bytes(cls, data: bytes) -> OperatorMetadata:
        """Parse operator metadata of format v1 or v2."""
        what = "operator metadata"
        version, obj = versioned_json(data, OPERATOR_METADATA_MAX_VERSION, what)
        info = json_object(obj.get("operatorInfo"), f"{what} operatorInfo")
        stores = obj.get("stateStoreInfo")
        if not isinstance(stores, list):
            raise CorruptData(f"{what}: stateStoreInfo must be a list")
        properties = None
        if obj.get("operatorPropertiesJson") is not None:
            text = json_str(obj, "operatorPropertiesJson", what)
            properties = json_object(
                load_json(text, f"{what} operatorPropertiesJson"), f"{what} operatorProperties"
            )
        return cls(
            format_version=version,
            operator_id=json_int(info, "operatorId", f"{what} operatorInfo"),
            operator_name=json_str(info, "operatorName", f"{what} operatorInfo"),
            stores=tuple(StoreInfo.from_json(s) for s in stores),
            operator_properties=properties,
        )

    def store(self, name: str) -> StoreInfo:
        """The store called ``name``; KeyError if the operator has none."""
        for store in self.stores:
            if store.store_name == name:
                return store
        raise KeyError(name)
