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

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from stateglass.parsers.avro import avro_row_decoder
from stateglass.parsers.errors import CorruptData, UnsupportedFormat
from stateglass.parsers.java_bytes import murmur3_hash_bytes
from stateglass.parsers.rocksdb_encoding import (
    decode_value,
    decode_values,
    key_layout,
    split_cf_prefix,
    split_schema_id,
)
from stateglass.parsers.sparktypes import ArrayType, AtomicType, DataType, MapType, StructType
from stateglass.parsers.unsaferow import row_decoder
from stateglass.parsers.unsafewriter import encode_row

Row = tuple[Any, ...]
Pair = tuple[Row, "Row | None"]
Column = tuple[str, DataType]
"""One output column of Spark's reader: its name and type."""

# transformWithState state variable types (operator metadata ``stateVariableType``).
VALUE_STATE = "ValueState"
LIST_STATE = "ListState"
MAP_STATE = "MapState"
TIMER_STATE = "TimerState"
STATE_VARIABLE_TYPES = (VALUE_STATE, LIST_STATE, MAP_STATE, TIMER_STATE)


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
    # transformWithState: the state variable's type (None: a plain key/value store) and
    # whether list/map state comes one row per element (Spark's flattenCollectionTypes).
    state_kind: str | None = None
    flatten: bool = True


class RowCodec:
    """Decodes the raw key/value bytes of one store into (key row, value row) pairs."""

    def __init__(self, spec: StoreSpec) -> None:
        self.spec = spec
        self.key_schema = spec.key_schema
        self.value_schema = spec.value_schema
        self._part_decoder: Callable[[StructType], Callable[..., Row]] = row_decoder
        if spec.encoding_format == "avro":
            if spec.provider == "hdfs":
                raise UnsupportedFormat("Avro state encoding with the HDFS state store provider")
            # Avro keys and values are ``0x00 ‖ LE16 schemaId ‖ datum``; the version byte
            # goes with the framing below, the schema id here.
            self._part_decoder = avro_row_decoder
            self._key = self._avro_payload(avro_row_decoder(spec.key_schema))
            self._value = self._avro_payload(avro_row_decoder(spec.value_schema))
        elif spec.encoding_format == "unsaferow":
            self._key = row_decoder(spec.key_schema)
            self._value = row_decoder(spec.value_schema)
        else:
            raise UnsupportedFormat(f"state encoding format {spec.encoding_format!r}")
        self._decode: Callable[[bytes, bytes], list[Pair]]
        if spec.provider == "hdfs":
            self._decode = self._decode_hdfs
        else:
            self._layout = key_layout(
                spec.key_encoder_spec,
                spec.key_schema,
                encoding_format=spec.encoding_format,
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
        return self._part_decoder(schema)(payload)

    @staticmethod
    def _avro_payload(decode: Callable[[bytes], Row]) -> Callable[[bytes], Row]:
        """Decode ``LE16 schemaId ‖ datum`` with the current schema, whatever the id.

        Rows written before a schema change carry an older id; reading those needs the
        older schema file entry, which StoreSpec does not carry (yet).
        """

        def decode_payload(payload: bytes) -> Row:
            return decode(split_schema_id(payload)[1])

        return decode_payload

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
        if self.spec.encoding_format != "unsaferow":
            return False  # Avro datums are not UnsafeRows
        if self.spec.state_kind not in (None, VALUE_STATE):
            return False  # list/map/timer rows are reshaped: see :meth:`rows`
        return self.spec.provider == "hdfs" or (self._simple_key and not self.spec.multi_value)

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
            raise CorruptData(
                "key does not start with encoding version 0" if key else "empty key", 0
            )
        if value is None:
            return key[1:], None
        if not self.spec.row_checksum and value and value[0] == 0:
            return key[1:], value[1:]
        return key[1:], decode_value(value, row_checksum=self.spec.row_checksum, full_key=full_key)

    def decode(self, key: bytes, value: bytes) -> list[Pair]:
        """The rows one stored (key, value) stands for: none for another column family."""
        return self._decode(key, value)

    def decode_key(self, key: bytes) -> Row | None:
        """The key row of one stored key, its value left alone (where a key goes depends on
        the key only); None for another column family."""
        return self._key(key) if self.spec.provider == "hdfs" else self._rocksdb_key(key)

    def decode_change(self, change_type: str, key: bytes, value: bytes | None) -> list[Pair]:
        """Rows of one change-feed record; a delete has no value."""
        if value is None:
            if self.spec.provider == "hdfs":
                return [(self._key(key), None)]
            row_key = self._rocksdb_key(key)
            return [] if row_key is None else [(row_key, None)]
        return self._decode(key, value)

    # ---- rows as Spark's State Data Source returns them -------------------------------------
    #
    # ``columns`` name what comes before ``partition_id`` (``SchemaUtil.getSourceSchema``);
    # ``rows`` reshapes the decoded pairs of one stored item into such rows. Plain stores and
    # ValueState give (key, value); the other transformWithState variables:
    #
    # * ListState: (key, list_element) per element, or (key, list_value) with every element;
    # * MapState: the composite key struct<key, userKey> split into (key, user_map_key,
    #   user_map_value), or (key, map_value) per grouping key (see :meth:`partition_rows`);
    # * TimerState (readRegisteredTimers): (key, expiration_timestamp_ms).

    @cached_property
    def columns(self) -> tuple[Column, ...]:
        """State output columns before ``partition_id``, named as Spark names them."""
        spec = self.spec
        key, value = spec.key_schema, spec.value_schema
        if spec.state_kind == LIST_STATE:
            if spec.flatten:
                return (("key", key), ("list_element", value))
            return (("key", key), ("list_value", ArrayType(value)))
        if spec.state_kind == MAP_STATE:
            group, user = self._composite[1], self._composite[3]
            if spec.flatten:
                return (("key", group), ("user_map_key", user), ("user_map_value", value))
            return (("key", group), ("map_value", MapType(user, value)))
        if spec.state_kind == TIMER_STATE:
            return (("key", self._composite[1]), ("expiration_timestamp_ms", AtomicType("long")))
        return (("key", key), ("value", value))

    @cached_property
    def change_columns(self) -> tuple[Column, ...]:
        """Change-feed columns between ``change_type`` and ``partition_id``.

        Spark's change feed is always flattened: a list record gives one row per element
        (see :meth:`change_rows`), a map record its key, user key and value.
        """
        spec = self.spec
        if spec.state_kind == LIST_STATE:
            return (("key", spec.key_schema), ("list_element", spec.value_schema))
        if spec.state_kind == MAP_STATE:
            group, user = self._composite[1], self._composite[3]
            return (("key", group), ("user_map_key", user), ("user_map_value", spec.value_schema))
        if spec.state_kind == TIMER_STATE:
            return self.columns
        return (("key", spec.key_schema), ("value", spec.value_schema))

    @cached_property
    def _composite(self) -> tuple[int, StructType, int, DataType]:
        """Map and timer keys are ``struct<key, userKey | expiryTimestampMs>``: where is what."""
        second = "userKey" if self.spec.state_kind == MAP_STATE else "expiryTimestampMs"
        names = self.key_schema.names
        if "key" not in names or second not in names:
            raise CorruptData(
                f"{self.spec.state_kind} key schema {self.key_schema.simple_string()} "
                f"has no 'key' and '{second}' fields"
            )
        group_at, second_at = names.index("key"), names.index(second)
        group = self.key_schema.fields[group_at].data_type
        if not isinstance(group, StructType):
            raise CorruptData(f"grouping key is {group.simple_string()}, expected a struct")
        return group_at, group, second_at, self.key_schema.fields[second_at].data_type

    @property
    def grouped(self) -> bool:
        """Whether rows come from a whole partition at once (:meth:`partition_rows`).

        Only unflattened map state: Spark gathers the consecutive entries of one grouping
        key into one ``map_value``.
        """
        return self.spec.state_kind == MAP_STATE and not self.spec.flatten

    def rows(self, key: bytes, value: bytes) -> list[Row]:
        """Output rows (see :attr:`columns`) of one stored item; none for another CF."""
        pairs = self.decode(key, value)
        kind = self.spec.state_kind
        out: list[Row]
        if kind == LIST_STATE and not self.spec.flatten:
            out = [(pairs[0][0], [v for _, v in pairs])] if pairs else []
        elif kind is None and self.spec.multi_value:
            # A multi-valued store read whole (join format 4's keyWithTsToValues): Spark's
            # store iterator decodes one value per key, the first.
            out = [(k, v) for k, v in pairs[:1]]
        elif kind == MAP_STATE:
            if not self.spec.flatten:
                raise TypeError("unflattened map state is read a partition at a time")
            group_at, _, user_at, _ = self._composite
            out = [(k[group_at], k[user_at], v) for k, v in pairs]
        elif kind == TIMER_STATE:
            group_at, _, ts_at, _ = self._composite
            out = [(k[group_at], k[ts_at]) for k, _ in pairs]
        else:
            out = [(k, v) for k, v in pairs]
        return out

    def change_rows(
        self, change_type: str, key: bytes, value: bytes | None
    ) -> list[tuple[str, Row]]:
        """``(change type, row)`` per output row (see :attr:`change_columns`) of one record.

        A multi-valued record (list state) gives one row per element, as Spark 4.3's change
        feed does: the first element with the record's type, the others as ``append``.
        """
        pairs = self.decode_change(change_type, key, value)
        kind = self.spec.state_kind
        rows: list[Row]
        if kind == MAP_STATE:
            group_at, _, user_at, _ = self._composite
            rows = [(k[group_at], k[user_at], v) for k, v in pairs]
        elif kind == TIMER_STATE:
            group_at, _, ts_at, _ = self._composite
            rows = [(k[group_at], k[ts_at]) for k, _ in pairs]
        else:
            rows = [(k, v) for k, v in pairs]
        if self.spec.multi_value:
            return [(change_type if i == 0 else "append", row) for i, row in enumerate(rows)]
        return [(change_type, row) for row in rows]

    def partition_rows(self, items: Iterable[tuple[bytes, bytes]]) -> Iterator[Row]:
        """Output rows of every stored item of one partition.

        For unflattened map state the items are visited in RocksDB key order, as Spark's
        iterator visits them, and each grouping key's entries become one map whose entry
        order is that of Spark's ``scala.collection.mutable.HashMap`` (which Spark fills,
        copies and clears once per grouping key).
        """
        if not self.grouped:
            for key, value in items:
                yield from self.rows(key, value)
            return
        group_at, _, user_at, user_type = self._composite
        if not isinstance(user_type, StructType):
            raise CorruptData(f"map user key is {user_type.simple_string()}, expected a struct")
        order = ScalaHashMapOrder()
        current: bytes | None = None
        group: Any = None
        entries: list[tuple[Any, Any]] = []
        for key, value in sorted(items, key=lambda item: item[0]):
            pairs = self.decode(key, value)
            if not pairs:
                continue
            prefix = self._grouping_bytes(key)
            if prefix != current:
                if entries:
                    yield (group, order.arrange(entries, user_type))
                current, group, entries = prefix, pairs[0][0][group_at], []
            entries.extend((k[user_at], v) for k, v in pairs)
        if entries:
            yield (group, order.arrange(entries, user_type))

    def _grouping_bytes(self, key: bytes) -> bytes:
        """The encoded grouping-key part of a map-state key (Spark compares these rows)."""
        if self.spec.cf_id is not None:
            _, key = split_cf_prefix(key)
        return self._layout.split(key).rows[0]


class ScalaHashMapOrder:
    """Entry order of a Scala 2.13 ``mutable.HashMap`` that is filled, read and cleared.

    ``SchemaUtil.unifyMapStateRowPair`` adds a grouping key's (user key → value) entries to
    one ``mutable.Map``, copies it into the row's ``ArrayBasedMapData`` and clears it for the
    next grouping key. The map iterates bucket by bucket; a bucket keeps its entries sorted
    by (signed) improved hash, ties in insertion order; the bucket of an entry is its
    improved hash masked by the table size, which starts at 16 and doubles when an insert
    would reach 3/4 of it — and ``clear()`` keeps the table, so the size carries over from
    one grouping key to the next. The key's hash is ``UnsafeRow.hashCode``: Murmur3 of its
    bytes with seed 42.
    """

    INITIAL_CAPACITY = 16
    LOAD_FACTOR = 0.75

    def __init__(self) -> None:
        self.capacity = self.INITIAL_CAPACITY

    def arrange(
        self, entries: Sequence[tuple[Any, Any]], key_type: StructType
    ) -> list[tuple[Any, Any]]:
        """``entries`` (insertion order, struct keys) in the order the map hands them back."""
        hashes = [murmur3_hash_bytes(encode_row(key_type, k), 42) for k, _ in entries]
        return [entries[i] for i in self.order(hashes)]

    def order(self, hashes: Sequence[int]) -> list[int]:
        """Fill the map with keys whose ``hashCode`` are ``hashes``: their iteration order.

        Keys must be distinct. The table keeps its size for the next call, like ``clear()``.
        """
        for size in range(len(hashes)):
            if size + 1 >= int(self.capacity * self.LOAD_FACTOR):
                self.capacity *= 2
        mask = self.capacity - 1
        improved = [improved_hash(h) for h in hashes]
        return sorted(range(len(hashes)), key=lambda i: (improved[i] & mask, improved[i], i))


def improved_hash(h: int) -> int:
    """Scala 2.13 ``HashMap.improveHash``: ``h ^ (h >>> 16)`` as a signed 32-bit int."""
    u = h & 0xFFFFFFFF
    u ^= u >> 16
    return u - (1 << 32) if u >> 31 else u
