"""A RocksDB store's rows in the neutral form of a rewrite, and back.

The neutral form is the HDFS-backed provider's: ``(key UnsafeRow, value UnsafeRow)``, the
key row holding every key column in key-schema order, no checksums. RocksDB stores the same
rows through its key encoder (a version byte; a prefix scan splits the key row in two) and,
with row checksums, wraps each value in ``LE32 crc ‖ LE32 len``. :class:`RocksDBRows` turns
one into the other, in both directions, so that a rewrite reads any provider and writes any.

A store with virtual column families (transformWithState) has no other provider to go to
(Spark keeps it on RocksDB only), so its neutral form is RocksDB's own rows, byte for byte,
under the column family ids a rewrite gives the store (:func:`column_family_ids`);
:class:`ColumnFamilyRows` moves a source partition's rows onto those ids.

Example::

    rows = RocksDBRows(layout, row_checksum=False)
    raw_key, raw_value = rows.to_rocksdb(key_row, value_row)
    assert rows.to_neutral(raw_key, raw_value) == (key_row, value_row)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from stateglass.collectors.checkpoints.checkpoint import StoreInfo
from stateglass.collectors.errors import CorruptFile, RewriteRefused
from stateglass.parsers.errors import ParseError, UnsupportedFormat
from stateglass.parsers.rocksdb_encoding import (
    CF_PREFIX_BYTES,
    NO_PREFIX,
    PREFIX_KEY_SCAN,
    STATE_ENCODING_VERSION,
    KeyLayout,
    cf_prefix,
    decode_value,
    decode_values,
    encode_value,
    encode_values,
    key_layout,
    split_cf_prefix,
)
from stateglass.parsers.schema_file import DEFAULT_COLUMN_FAMILY
from stateglass.parsers.state_rows import LIST_STATE
from stateglass.parsers.unsaferow import row_decoder
from stateglass.parsers.unsafewriter import encode_row

# The key encoders a rewrite can write: the ones of stores without column families.
WRITABLE_KEY_ENCODERS = (NO_PREFIX, PREFIX_KEY_SCAN)
SESSION_WINDOW = "sessionWindowStateStoreSaveExec"
_VERSION = bytes([STATE_ENCODING_VERSION])  # the encoding version byte a row starts with


class RocksDBRows:
    """Neutral rows ↔ RocksDB rows for one store without virtual column families."""

    def __init__(self, layout: KeyLayout, *, row_checksum: bool = False) -> None:
        if layout.spec_type not in WRITABLE_KEY_ENCODERS or layout.avro:
            raise UnsupportedFormat(
                f"a RocksDB store keyed by {layout.spec_type} ({layout.encoding_format}); "
                "StateGlass rewrites stores keyed without a prefix or by a prefix scan"
            )
        self.layout = layout
        self.row_checksum = row_checksum
        self._split_key: Callable[[bytes], list[bytes]] | None = None
        self._join_key: Callable[[list[bytes]], bytes] | None = None
        if len(layout.parts) > 1:
            self._split_key, self._join_key = _projections(layout)
        # A key of one row, a value without checksum: each is the version byte and the row,
        # which a rewrite of millions of rows strips and adds without the general framing.
        self.plain = layout.spec_type == NO_PREFIX and not row_checksum

    def to_rocksdb(self, key_row: bytes, value_row: bytes) -> tuple[bytes, bytes]:
        """The RocksDB key and value of one neutral row."""
        if self.plain:
            return _VERSION + key_row, _VERSION + value_row
        parts = [key_row] if self._split_key is None else self._split_key(key_row)
        key = self.layout.join(parts)
        return key, encode_value(value_row, row_checksum=self.row_checksum, full_key=key)

    def to_neutral(self, key: bytes, value: bytes) -> tuple[bytes, bytes]:
        """The neutral row of one RocksDB key and value."""
        parts = list(self.layout.split(key).rows)
        key_row = parts[0] if self._join_key is None else self._join_key(parts)
        return key_row, decode_value(value, row_checksum=self.row_checksum, full_key=key)


def column_family_refusal(store: StoreInfo) -> str | None:
    """Why a store with virtual column families cannot be rewritten, or None."""
    if store.is_transform_with_state:
        return None
    return (
        f"operator {store.operator_id} ({store.operator_name}) keeps its state in virtual "
        "column families (join state formats 3 and 4), which StateGlass does not rewrite yet"
    )


def column_family_ids(store: StoreInfo) -> dict[str, int]:
    """The virtual column family ids a rewrite gives ``store``: ``default`` 1, then the
    schema file's column families in its order. Spark takes the ids of a loaded version from
    its zip's ``columnFamilyMapping``, so any numbering the keys agree with loads."""
    names = [DEFAULT_COLUMN_FAMILY]
    names += [cf.name for cf in store.column_families if cf.name != DEFAULT_COLUMN_FAMILY]
    return {name: cf_id for cf_id, name in enumerate(names, start=1)}


def is_internal_family(name: str) -> bool:
    """Spark's ``isInternalColFamily``: timers, TTL indexes and counters start with ``$``."""
    return name.startswith("$")


class ColumnFamilyRows:
    """One source partition's rows of a store with virtual column families, moved onto the
    rewrite's column family ids (:func:`column_family_ids`); values keep their bytes, their
    row checksums taken again over the new key when the id changes."""

    def __init__(
        self,
        store: StoreInfo,
        source_ids: Mapping[str, int],
        *,
        row_checksum: bool,
        delimiter: bytes,
        where: str,
    ) -> None:
        self.names = {cf_id: name for name, cf_id in source_ids.items()}
        self.ids = column_family_ids(store)
        self.lists = {v.name for v in store.state_variables if v.kind == LIST_STATE}
        self.row_checksum = row_checksum
        self.delimiter = delimiter
        self.where = where

    def family(self, key: bytes) -> tuple[str, bytes]:
        """The column family of a stored key, and the key without its id."""
        try:
            cf_id, rest = split_cf_prefix(key)
        except ParseError as exc:
            raise CorruptFile(self.where, f"a stored key does not decode: {exc.why}") from exc
        name = self.names.get(cf_id)
        if name is None or name not in self.ids:
            raise RewriteRefused(
                self.where,
                f"a key of column family id {cf_id} ({name or 'not in the zip metadata'}), "
                "which the state schema file does not name",
            )
        return name, rest

    def moved(self, name: str, key: bytes, value: bytes) -> tuple[bytes, bytes]:
        """The stored ``key`` and ``value`` of column family ``name`` under its new id."""
        new_key = cf_prefix(self.ids[name]) + key[CF_PREFIX_BYTES:]
        if new_key == key or not self.row_checksum:
            return new_key, value
        try:
            if name in self.lists:
                rows = decode_values(value, row_checksum=True, full_key=key)
                value = encode_values(
                    rows, row_checksum=True, full_key=new_key, delimiter=self.delimiter
                )
            else:
                row = decode_value(value, row_checksum=True, full_key=key)
                value = encode_value(row, row_checksum=True, full_key=new_key)
        except ParseError as exc:
            raise CorruptFile(self.where, f"a stored value does not decode: {exc.why}") from exc
        return new_key, value


def store_layout(store: StoreInfo, where: str, encoding_format: str = "unsaferow") -> KeyLayout:
    """The RocksDB key layout of a store without column families, from its schema file
    and operator metadata; ``where`` names the store in a refusal."""
    if store.uses_column_families:
        raise RewriteRefused(
            where,
            column_family_refusal(store)
            or f"operator {store.operator_id} keeps its state in virtual column families: "
            "its rows are RocksDB's own, with no key layout of a single store",
        )
    key_schema = store.key_schema
    if key_schema is None:
        raise RewriteRefused(where, "no state schema file found for this store")
    prefix_columns = store.num_cols_prefix_key
    if not prefix_columns and store.operator_name.startswith(SESSION_WINDOW):
        # Spark 3.x writes no operator metadata; its session window store is keyed by a
        # prefix scan over the grouping columns, the session being the last key column.
        prefix_columns = len(key_schema.fields) - 1
    try:
        return key_layout(
            None, key_schema, encoding_format=encoding_format, num_cols_prefix_key=prefix_columns
        )
    except ParseError as exc:
        raise RewriteRefused(where, exc.why) from exc


def _projections(
    layout: KeyLayout,
) -> tuple[Callable[[bytes], list[bytes]], Callable[[list[bytes]], bytes]]:
    """Split a whole key row into its parts' rows, and join them back, by value."""
    schema = layout.key_schema
    decode_key = row_decoder(schema)
    part_decoders = [
        (row_decoder(p.row_schema or p.schema), p.schema, p.ordinals) for p in layout.parts
    ]

    def split(key_row: bytes) -> list[bytes]:
        values = decode_key(key_row)
        return [
            encode_row(part_schema, [values[i] for i in ordinals])
            for _, part_schema, ordinals in part_decoders
        ]

    def join(parts: list[bytes]) -> bytes:
        values: list[Any] = [None] * len(schema.fields)
        for (decode, _, ordinals), payload in zip(part_decoders, parts, strict=True):
            for ordinal, value in zip(ordinals, decode(payload), strict=True):
                values[ordinal] = value
        return encode_row(schema, values)

    return split, join


def neutral_rows(
    store: StoreInfo, rows: Iterable[tuple[bytes, bytes]], *, row_checksum: bool, where: str
) -> Iterator[tuple[bytes, bytes]]:
    """A RocksDB store's raw rows (as its reader gives them) in the neutral form, for a
    rewrite into any provider; ``row_checksum`` is the source's conf. A store with virtual
    column families is its own neutral form (module docstring)."""
    if store.uses_column_families:
        yield from rows
        return
    codec = RocksDBRows(store_layout(store, where), row_checksum=row_checksum)
    for key, value in rows:
        if codec.plain and key[:1] == _VERSION and value[:1] == _VERSION:
            yield key[1:], value[1:]
            continue
        try:
            yield codec.to_neutral(key, value)
        except ParseError as exc:
            raise CorruptFile(where, f"a stored row does not decode: {exc.why}") from exc
