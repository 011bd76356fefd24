"""Rows of each transformWithState state variable, as Spark's reader returns them.

A transformWithState store keeps every state variable, its timers and their indexes as
virtual column families of one RocksDB instance, so the store's raw key count (what
``state_versions.num_keys`` holds) is none of the numbers a user reads back: a ListState
read flattened gives one row per element, the timers are one row per stored timer, and the
TTL and timer indexes are never read at all. This module counts, per column family, the rows
``stateglass state --state-var`` (Spark's ``stateVarName``) or ``--read-timers`` return, with
the raw keys beside them.

Example::

    reader = source.reader(partition)
    for count in count_variables(reader, version, store, False, store_dir):
        print(count.name, count.role, count.rows, count.raw_keys)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from stateglass.collectors.checkpoints.checkpoint import StoreInfo
from stateglass.collectors.errors import CorruptFile
from stateglass.collectors.stores import StoreReader
from stateglass.parsers.errors import ParseError
from stateglass.parsers.rocksdb_encoding import decode_values, split_cf_prefix
from stateglass.parsers.state_rows import LIST_STATE, TIMER_STATE

if TYPE_CHECKING:
    from stateglass.collectors.checkpoints.state_reader import StateSource

# What a column family holds, as a page or a gauge labels it.
STATE_VARIABLE = "state variable"
TIMERS = "timers"
TTL_INDEX = "ttl index"
INTERNAL = "internal"
# Spark's TTL index of a state variable (StateStoreColumnFamilySchemaUtils.getTtlColFamilyName).
TTL_PREFIX = "$ttl_"


@dataclass(frozen=True)
class VariableRows:
    """One column family of a transformWithState store at one version of one partition."""

    # the column family: a state variable's name, the timers' or an index's ($ttl_x, …)
    name: str
    # STATE_VARIABLE, TIMERS, TTL_INDEX or INTERNAL
    role: str
    # the state variable's type (ValueState, ListState, MapState, TimerState); None otherwise
    kind: str | None
    # rows Spark's reader returns (a ListState flattened: one per element; a TTL index: one
    # per entry); None for an internal column family, which no reader option returns
    rows: int | None
    # keys stored in RocksDB
    raw_keys: int


def roles(store: StoreInfo) -> dict[str, tuple[str, str | None]]:
    """Each column family name the store's schema and metadata know: (role, kind)."""
    out: dict[str, tuple[str, str | None]] = {}
    for cf in store.column_families:
        out[cf.name] = (TTL_INDEX if cf.name.startswith(TTL_PREFIX) else INTERNAL, None)
    for var in store.state_variables:
        role = TIMERS if var.kind == TIMER_STATE else STATE_VARIABLE
        out[var.name] = (role, var.kind)
        if var.ttl_enabled:
            out.setdefault(TTL_PREFIX + var.name, (TTL_INDEX, None))
    out.pop("default", None)  # RocksDB's own column family: Spark keeps nothing in it
    return out


def count_variables(
    reader: StoreReader, version: int, store: StoreInfo, row_checksum: bool, where: str
) -> list[VariableRows]:
    """Rows and raw keys of every column family of ``store`` at ``version`` of ``reader``'s
    partition (``where``: its directory, for an error); a column family whose id no retained
    zip records is left out."""
    ids: dict[int, tuple[str, str, str | None]] = {}
    for name, (role, kind) in roles(store).items():
        cf_id = reader.column_family_id(name)
        if cf_id is not None:
            ids[cf_id] = (name, role, kind)
    return tally(reader.load(version), ids, row_checksum, where)


def tally(
    items: Iterable[tuple[bytes, bytes]],
    ids: dict[int, tuple[str, str, str | None]],
    row_checksum: bool,
    where: str,
) -> list[VariableRows]:
    """Count ``items`` per column family ``ids`` names (id -> (name, role, kind))."""
    keys: dict[int, int] = dict.fromkeys(ids, 0)
    elements: dict[int, int] = dict.fromkeys(ids, 0)
    lists = {cf for cf, (_, _, kind) in ids.items() if kind == LIST_STATE}
    try:
        for key, value in items:
            cf, _ = split_cf_prefix(key)
            if cf not in keys:
                continue
            keys[cf] += 1
            if cf in lists:
                elements[cf] += len(decode_values(value, row_checksum=row_checksum, full_key=key))
    except ParseError as exc:
        raise CorruptFile(where, f"cannot count the rows of its state variables: {exc}") from exc
    out = []
    for cf, (name, role, kind) in sorted(ids.items(), key=lambda item: item[1][0]):
        rows = elements[cf] if cf in lists else (None if role == INTERNAL else keys[cf])
        out.append(VariableRows(name, role, kind, rows, keys[cf]))
    return out


def store_rows(source: StateSource, batch_id: int) -> list[VariableRows]:
    """Rows and raw keys of every column family of ``source``'s transformWithState store at
    ``batch_id`` (state version ``batch_id + 1``), summed over its partitions then."""
    version = batch_id + 1
    totals: dict[str, VariableRows] = {}
    for partition in source.partitions_for(batch_id):
        where = source.cp.store_dir(source.store.operator_id, partition, source.store.store_name)
        with source.explaining(version):
            counts = count_variables(
                source.reader(partition), version, source.store, source.row_checksum, where
            )
        for c in counts:
            was = totals.get(c.name)
            if was is None:
                totals[c.name] = c
                continue
            rows = None if c.rows is None else (was.rows or 0) + c.rows
            totals[c.name] = replace(was, rows=rows, raw_keys=was.raw_keys + c.raw_keys)
    return list(totals.values())
