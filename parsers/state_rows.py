"""Raw state-store (key, value) bytes → key and value rows, per provider and encoding.

Example::

    codec = RowCodec(StoreSpec(provider="hdfs", key_schema=k, value_schema=v))
    for key_bytes, value_bytes in store_items:
        for key, value in codec.decode(key_bytes, value_bytes):
            ...

HDFS stores keep bare UnsafeRows. RocksDB prefixes each row with an encoding-version byte,
may frame keys for prefix/range scans (session windows, transformWithState), may prefix keys
with a 2-byte virtual column family id, and may keep several values per key (list state).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from parsers.errors import CorruptData, UnsupportedFormat
from parsers.rocksdb_encoding import (
    decode_value,
    decode_values,
    key_layout,
    split_cf_prefix,
)
from parsers.sparktypes import StructType
from parsers.unsaferow import row_decoder

Row = tuple[Any, ...]
Pair = tuple[Row, "Row | None"]


@dataclass(frozen=True)
class StoreSpec:
    """What decides how one store's (or one column family's) bytes are laid out."""

    provider: str
    key_schema: StructType
    value_schema: StructType
    key_encoder_spec: Mapping[str, Any] | None = field(default=None, hash=False)
    num_cols_prefix_key: int = 0
    cf_id: int | None = None
    multi_value: bool = False
    row_checksum: bool = False
    encoding_format: str = "unsaferow"


class RowCodec:
    """Decodes the raw key/value bytes of one store into (key row, value row) pairs."""

    def __init__(self, spec: StoreSpec) -> None:
        if spec.encoding_format != "unsaferow":
            raise UnsupportedFormat(
                f"state encoding format {spec.encoding_format!r} is not supported yet "
                "(only unsaferow)"
            )
        self.spec = spec
        self.key_schema = spec.key_schema
        self.value_schema = spec.value_schema
        self._key = row_decoder(spec.key_schema)
        self._value = row_decoder(spec.value_schema)
        self._decode: Callable[[bytes, bytes], list[Pair]]
        if spec.provider == "hdfs":
            self._decode = self._decode_hdfs
        else:
            self._layout = key_layout(
                spec.key_encoder_spec,
                spec.key_schema,
                num_cols_prefix_key=spec.num_cols_prefix_key,
            )
            simple = (
                spec.key_encoder_spec is None
                or spec.key_encoder_spec.get("keyStateEncoderType") == "NoPrefixKeyStateEncoderSpec"
            ) and not spec.num_cols_prefix_key
            self._simple_key = simple
            self._decode = self._decode_rocksdb
        if spec.provider == "hdfs":
            self._simple_key = True

    # HDFS rows are bare UnsafeRows.
    def _decode_hdfs(self, key: bytes, value: bytes) -> list[Pair]:
        return [(self._key(key), self._value(value))]

    def _rocksdb_key(self, key: bytes) -> Row | None:
        if self.spec.cf_id is not None:
            cf, key = split_cf_prefix(key)
            if cf != self.spec.cf_id:
                return None
        if self._simple_key:
            if not key or key[0] != 0:
                raise CorruptData(
                    "key does not start with encoding version 0" if key else "empty key", 0
                )
            return self._key(key[1:])
        return self._layout.decode(key, self._decode_part)

    def _decode_part(self, payload: bytes, schema: StructType) -> Sequence[Any]:
        return row_decoder(schema)(payload)

    def _decode_rocksdb(self, key: bytes, value: bytes) -> list[Pair]:
        row_key = self._rocksdb_key(key)
        if row_key is None:
            return []
        if self.spec.multi_value:
            payloads = decode_values(value, row_checksum=self.spec.row_checksum, full_key=key)
            return [(row_key, self._value(p)) for p in payloads]
        if not self.spec.row_checksum and value and value[0] == 0:
            return [(row_key, self._value(value[1:]))]
        payload = decode_value(value, row_checksum=self.spec.row_checksum, full_key=key)
        return [(row_key, self._value(payload))]

    @property
    def raw_capable(self) -> bool:
        """Whether :meth:`payloads` can hand out whole key and value rows as bytes."""
        return self.spec.provider == "hdfs" or (
            self._simple_key and not self.spec.multi_value
        )

    def payloads(self, key: bytes, value: bytes | None) -> tuple[bytes, bytes | None] | None:
        """The key and value UnsafeRow bytes inside a stored pair, without decoding them.

        Only for :attr:`raw_capable` codecs; None when the key belongs to another column
        family. Lets a renderer go from bytes to JSON in one step.
        """
        if self.spec.provider == "hdfs":
            return key, value
        full_key = key
        if self.spec.cf_id is not None:
            cf, key = split_cf_prefix(key)
            if cf != self.spec.cf_id:
                return None
        if not key or key[0] != 0:
            raise CorruptData("key does not start with encoding version 0" if key else "empty key", 0)
        if value is None:
            return key[1:], None
        if not self.spec.row_checksum and value and value[0] == 0:
            return key[1:], value[1:]
        return key[1:], decode_value(value, row_checksum=self.spec.row_checksum, full_key=full_key)

    def decode(self, key: bytes, value: bytes) -> list[Pair]:
        """The rows one stored (key, value) stands for: none for another column family."""
        return self._decode(key, value)

    def decode_change(self, change_type: str, key: bytes, value: bytes | None) -> list[Pair]:
        """Rows of one change-feed record; a delete has no value."""
        if value is None:
            if self.spec.provider == "hdfs":
                return [(self._key(key), None)]
            row_key = self._rocksdb_key(key)
            return [] if row_key is None else [(row_key, None)]
        return self._decode(key, value)
