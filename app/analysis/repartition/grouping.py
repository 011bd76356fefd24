"""The grouping key of every raw key of a transformWithState store.

Such a store keeps its state variables, their TTL indexes, both timer indexes and the list
row counters as virtual column families of one RocksDB instance; where the grouping key sits
in each family's key is :func:`~.keys.column_family_key_path`. A rewrite sends each raw key
where its grouping key hashes (:mod:`..rewrite`), and ``--drop-keys`` leaves out every raw key
of a dropped grouping key (:mod:`..rewrite_edits`): both read the store through
:func:`grouped_rows`.

Example::

    for row in grouped_rows(cp, store, batch_id):
        print(row.partition, row.family, row.grouping_schema, row.grouping_key)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from stateglass.app.analysis.repartition.keys import Refused, column_family_key_path, key_at
from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.errors import RewriteRefused
from stateglass.collectors.rewrite.rocksdb_rows import ColumnFamilyRows, column_family_ids
from stateglass.parsers.errors import ParseError
from stateglass.parsers.rocksdb_encoding import KeyLayout, key_layout
from stateglass.parsers.schema_file import DEFAULT_COLUMN_FAMILY
from stateglass.parsers.sparktypes import StructType
from stateglass.parsers.unsaferow import row_decoder


@dataclass(frozen=True)
class GroupedRow:
    """One raw key of a transformWithState store, with its grouping key."""

    partition: int
    family: str
    key: bytes  # as stored, under the source's column family id
    value: bytes
    moved_key: bytes  # under the rewrite's column family id (:func:`column_family_ids`)
    moved_value: bytes  # its row checksums taken again over ``moved_key``
    grouping_schema: StructType
    grouping_key: tuple[object, ...]


def grouped_rows(
    cp: Checkpoint, store: StoreInfo, batch_id: int, below: int | None = None
) -> Iterator[GroupedRow]:
    """Every raw key of ``store`` at ``batch_id`` (partitions below ``below``, all when
    None), each source partition read once; a key of a column family Spark does not use, or
    one that does not decode, is a :class:`RewriteRefused`."""
    source = StateSource(cp, StateRequest(store.operator_id, store.store_name, batch_id))
    grouping = grouping_keys(store)
    for part in [p for p in source.partitions if below is None or p < below]:
        where = cp.store_dir(store.operator_id, part, store.store_name)
        reader = source.reader(part)
        found = {n: reader.column_family_id(n) for n in column_family_ids(store)}
        rows = ColumnFamilyRows(
            store,
            {n: i for n, i in found.items() if i is not None},
            row_checksum=source.row_checksum,
            delimiter=source.merge_delimiter,
            where=where,
        )
        for key, value in source.load(part, batch_id + 1):
            name, rest = rows.family(key)
            if name not in grouping:
                raise RewriteRefused(where, f"a key in column family {name!r}, unused by Spark")
            try:
                schema, values = grouping[name](rest)
            except (ParseError, Refused) as exc:
                why = exc.why if isinstance(exc, ParseError) else str(exc)
                raise RewriteRefused(where, f"a key of {name!r} does not decode: {why}") from exc
            moved_key, moved_value = rows.moved(name, key, value)
            yield GroupedRow(part, name, key, value, moved_key, moved_value, schema, values)


GroupingKey = Callable[[bytes], tuple[StructType, tuple[object, ...]]]


def grouping_keys(store: StoreInfo) -> dict[str, GroupingKey]:
    """Per column family: a key without its id → the grouping key's (schema, values)."""
    kinds = {v.name: v.kind for v in store.state_variables}
    decoders: dict[str, Callable[[bytes], tuple[object, ...]]] = {}

    def decode_row(payload: bytes, schema: StructType) -> tuple[object, ...]:
        text = schema.simple_string()
        if text not in decoders:
            decoders[text] = row_decoder(schema)
        return tuple(decoders[text](payload))

    def grouping(layout: KeyLayout, path: tuple[int, ...]) -> GroupingKey:
        return lambda key: key_at(path, layout.key_schema, layout.decode(key, decode_row))

    out: dict[str, GroupingKey] = {}
    # transformWithState keeps nothing in the default column family (Spark's partition key
    # extractors refuse it).
    for cf in [cf for cf in store.column_families if cf.name != DEFAULT_COLUMN_FAMILY]:
        try:
            path = column_family_key_path(cf.name, kinds)
            layout = key_layout(cf.key_state_encoder_spec, cf.key_schema)
        except (ParseError, Refused) as exc:
            why = exc.why if isinstance(exc, ParseError) else str(exc)
            raise RewriteRefused(f"{store.operator_id}/{cf.name}", why) from exc
        out[cf.name] = grouping(layout, path)
    return out
