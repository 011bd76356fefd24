"""A RocksDB store's rows in the neutral form of a rewrite, and back.

The neutral form is the HDFS-backed provider's: ``(key UnsafeRow, value UnsafeRow)``, the
key row holding every key column in key-schema order, no checksums. RocksDB stores the same
rows through its key encoder (a version byte; a prefix scan splits the key row in two) and,
with row checksums, wraps each value in ``LE32 crc ‖ LE32 len``. :class:`RocksDBRows` turns
one into the other, in both directions, so that a rewrite reads any provider and writes any.

Example::

    rows = RocksDBRows(layout, row_checksum=False)
    raw_key, raw_value = rows.to_rocksdb(key_row, value_row)
    assert rows.to_neutral(raw_key, raw_value) == (key_row, value_row)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from stateglass.collectors.checkpoints.checkpoint import StoreInfo
from stateglass.collectors.errors import CorruptFile, RewriteRefused
from stateglass.parsers.errors import ParseError, UnsupportedFormat
from stateglass.parsers.rocksdb_encoding import (
    NO_PREFIX,
    PREFIX_KEY_SCAN,
    KeyLayout,
    decode_value,
    encode_value,
    key_layout,
)
from stateglass.parsers.unsaferow import row_decoder
from stateglass.parsers.unsafewriter import encode_row

# The key encoders a rewrite can write: the ones of stores without column families.
WRITABLE_KEY_ENCODERS = (NO_PREFIX, PREFIX_KEY_SCAN)
SESSION_WINDOW = "sessionWindowStateStoreSaveExec"


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

    def to_rocksdb(self, key_row: bytes, value_row: bytes) -> tuple[bytes, bytes]:
        """The RocksDB key and value of one neutral row."""
        parts = [key_row] if self._split_key is None else self._split_key(key_row)
        key = self.layout.join(parts)
        return key, encode_value(value_row, row_checksum=self.row_checksum, full_key=key)

    def to_neutral(self, key: bytes, value: bytes) -> tuple[bytes, bytes]:
        """The neutral row of one RocksDB key and value."""
        parts = list(self.layout.split(key).rows)
        key_row = parts[0] if self._join_key is None else self._join_key(parts)
        return key_row, decode_value(value, row_checksum=self.row_checksum, full_key=key)


def store_layout(store: StoreInfo, where: str, encoding_format: str = "unsaferow") -> KeyLayout:
    """The RocksDB key layout of a store without column families, from its schema file
    and operator metadata; ``where`` names the store in a refusal."""
    if store.uses_column_families:
        raise RewriteRefused(
            where,
            f"operator {store.operator_id} ({store.operator_name}) keeps its state in virtual "
            "column families, which StateGlass does not rewrite for RocksDB",
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
    rewrite into any provider; ``row_checksum`` is the source's conf."""
    codec = RocksDBRows(store_layout(store, where), row_checksum=row_checksum)
    for key, value in rows:
        try:
            yield codec.to_neutral(key, value)
        except ParseError as exc:
            raise CorruptFile(where, f"a stored row does not decode: {exc.why}") from exc
