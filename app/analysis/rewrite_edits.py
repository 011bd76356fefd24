"""Edits a rewrite makes to the state it writes: keys dropped by a SQL predicate, and what
Spark's event-time eviction removes at the watermark.

``--drop-keys STORE "PREDICATE"`` names a store as ``stateglass state`` does
(``<operator id>/<store name>``, e.g. ``0/default``, ``1/left-keyToNumValues``) or by its
SQL catalog table (``op0_default``), and a predicate over that table's columns (``key``,
``value``, ``partition_id``), e.g. ``key.k IS NULL`` or ``value.count > 100``. The catalog
evaluates it (one SQL home: :class:`~stateglass.collectors.catalog.SqlSession`) at the
rewrite's batch; the rows it returns name the keys to drop.

What is dropped is a *key*, in every store that holds it, so the query restarts on a
consistent state: for a stream-stream join, a key matched in one side's ``keyToNumValues`` or
``keyWithIndexToValue`` leaves both of that side's stores, all its values with it (so no
index is left to renumber); for transformWithState, a grouping key leaves every column
family of the store (state variables, TTL indexes, both timer indexes, row counters):
``0/default`` evaluates the predicate over the grouping keys of all state variables, a state
variable's table (``op0_by_kind``, ``0/by_kind``) over that variable's rows. The result is
one :class:`StoreDrops` per store touched: the stored key bytes to leave out, computed at
plan time, which the command's writer applies as a row filter (:meth:`Edits.keeps`), and
what the dry run shows (keys per partition, bytes, the first rows removed).

``--evict-expired`` builds the same drops from the eviction audit's rules
(:mod:`stateglass.collectors.scan.eviction_rules`): the rows Spark's eviction removes at the
batch's ``batchWatermarkMs``, or at the higher watermark ``--watermark`` raises it to (a
lowered ``withWatermark`` delay), which :attr:`Edits.watermark` carries to DST's offsets.

Example::

    edits = plan_edits(cp, 41, (DropKeys("0/default", "key.k IS NULL"),), allow_empty=False)
    keeps = edits.keeps(store)  # None: the store is written whole
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from stateglass.app.analysis.repartition.grouping import grouped_rows
from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import views_of
from stateglass.collectors.errors import CollectorError
from stateglass.collectors.scan.eviction_rules import NEVER, TIMERS, EvictionRule
from stateglass.parsers.state_arrow import row_table

EVICT = "--evict-expired"
WATERMARK = "--watermark"
SAMPLE_ROWS = 20  # removed rows the dry run shows per store
JOIN_STORES = ("keyToNumValues", "keyWithIndexToValue")

# A key as the catalog's Arrow gives it, made hashable: structs and lists become tuples.
Frozen = Any


@dataclass(frozen=True)
class DropKeys:
    """One ``--drop-keys STORE PREDICATE``."""

    store: str
    predicate: str

    @property
    def label(self) -> str:
        return f"--drop-keys {self.store}"


@dataclass(frozen=True)
class StoreDrops:
    """What one store loses: its stored keys (the bytes its provider stores) left out."""

    operator_id: int
    store_name: str
    keys: frozenset[bytes]
    rows: int  # rows of the store at the batch, before the edit
    per_partition: tuple[tuple[int, int], ...]  # (source partition, keys removed)
    bytes_saved: int  # key and value bytes of the removed rows, as stored
    sample: tuple[tuple[int, bytes, bytes], ...]  # the first removed (partition, key, value)
    why: str  # the edits that removed them


@dataclass(frozen=True)
class Edits:
    """Every edit of a rewrite, planned: per-store drops, and what refuses them."""

    drops: tuple[StoreDrops, ...] = ()
    refusals: tuple[tuple[str, str], ...] = ()
    asked: bool = False  # any edit was requested (a rewrite with one changes the state)
    # (the batch's batchWatermarkMs, the raised one DST's last offsets entry records)
    watermark: tuple[int, int] | None = None

    def keeps(self, store: StoreInfo) -> Callable[[bytes], bool] | None:
        """The row filter of ``store`` (stored key bytes in: keep it?); None keeps all."""
        dropped = frozenset().union(
            *(
                d.keys
                for d in self.drops
                if (d.operator_id, d.store_name) == (store.operator_id, store.store_name)
            )
        )
        if not dropped:
            return None
        return lambda key: key not in dropped


@dataclass
class _Unit:
    """A group of stores that lose a key together: one store, or one side of a join."""

    operator_id: int
    stores: list[StoreInfo]
    keys: set[Frozen] = field(default_factory=set)
    why: list[str] = field(default_factory=list)


def plan_edits(
    cp: Checkpoint,
    batch: int,
    drop_keys: Sequence[DropKeys],
    allow_empty: bool,
    evict_expired: bool = False,
    watermark_ms: int | None = None,
) -> Edits:
    """The drops ``drop_keys`` (and ``evict_expired``) make at ``batch``, or the refusals
    that stop them. ``watermark_ms`` raises the batch's watermark: eviction judges by it, and
    DST's last offsets entry records it, so the restart goes on from it."""
    if not drop_keys and not evict_expired:
        return Edits()
    stores = cp.stores()
    refusals: list[tuple[str, str]] = []
    drops = _key_drops(cp, batch, drop_keys, stores, refusals) if drop_keys else []
    current = cp.offsets(batch).batch_watermark_ms or 0
    watermark = current if watermark_ms is None else watermark_ms
    if watermark < current:
        refusals.append((WATERMARK, _lowered(batch, current, watermark)))
    elif evict_expired:
        drops += _evictions(cp, batch, stores, refusals, watermark)
    for d in drops:
        if len(d.keys) == d.rows and d.rows and not allow_empty:
            refusals.append(
                (
                    f"{d.operator_id}/{d.store_name}",
                    f"{d.why} drops every key ({d.rows}): the store would be written empty "
                    "(--allow-empty writes it so)",
                )
            )
    raised = None if watermark_ms is None else (current, watermark_ms)
    return Edits(tuple(drops), tuple(refusals), asked=True, watermark=raised)


def _lowered(batch: int, current: int, wanted: int) -> str:
    return (
        f"{wanted} ms is below the watermark of batch {batch} ({current} ms): Spark has "
        "evicted by it already, so what it removed cannot come back; a watermark only rises"
    )


def _key_drops(
    cp: Checkpoint,
    batch: int,
    drop_keys: Sequence[DropKeys],
    stores: list[StoreInfo],
    refusals: list[tuple[str, str]],
) -> list[StoreDrops]:
    """The drops of ``drop_keys``; what stops one goes to ``refusals``."""
    from stateglass.collectors.catalog.session import SqlSession

    units: dict[tuple[int, str], _Unit] = {}
    with SqlSession([cp.root]) as session:
        for edit in drop_keys:
            try:
                store, table = _resolve(session, cp.root, edit, stores)
                matched = _matched_keys(session, table, batch, edit.predicate)
            except (_Refused, CollectorError) as exc:
                refusals.append((edit.label, _why(exc)))
                continue
            if not matched:
                refusals.append(
                    (
                        edit.label,
                        f"{edit.predicate!r} matches no key at batch {batch}: "
                        "nothing to drop, nothing written",
                    )
                )
                continue
            unit = _unit_of(store, stores, units)
            unit.keys |= {_unit_key(store, k) for k in matched}
            unit.why.append(f"{edit.label} {edit.predicate!r}")
    return [d for unit in units.values() for d in _unit_drops(cp, unit, batch)]


def _evictions(
    cp: Checkpoint,
    batch: int,
    stores: list[StoreInfo],
    refusals: list[tuple[str, str]],
    watermark: int,
) -> list[StoreDrops]:
    """What Spark's event-time eviction removes at ``watermark`` (``batch``'s
    ``batchWatermarkMs``, or the one it is raised to), by the eviction audit's rules."""
    from stateglass.collectors.scan.eviction_audit import overdue_items, store_rules

    if watermark <= 0:
        refusals.append((EVICT, f"no watermark at batch {batch}: nothing to evict"))
        return []
    every_rule = store_rules(cp, stores, True)
    rules = [r for r in every_rule if r.audited and r.kind != TIMERS]
    drops: list[StoreDrops] = []
    for rule in rules:
        store = next(
            s
            for s in stores
            if (s.operator_id, s.store_name) == (rule.operator_id, rule.store_name)
        )
        why = f"{EVICT} ({rule.kind}: {rule.predicate}, watermark {watermark} ms)"
        found = _store_drops(
            store,
            rule.operator_id,
            ((p, k, v) for p, k, v, *_ in overdue_items(cp, rule, batch + 1, watermark)),
            sum(1 for _ in _stored_rows(cp, store, batch)),
            why,
        )
        if found.keys:
            drops.append(found)
    if not drops:
        refusals.append(
            (
                EVICT,
                f"no key is past the watermark ({watermark} ms) at batch {batch}: "
                f"nothing to evict, nothing written{_unjudged(every_rule)}",
            )
        )
    return drops


def _unjudged(rules: list[EvictionRule]) -> str:
    """The stores ``--evict-expired`` cannot judge, and why: a store Spark never evicts holds
    no event time to judge it by, so only a predicate (``--drop-keys``) can shrink it."""
    never = [r for r in rules if r.kind == NEVER]
    if not never:
        return ""
    named = "; ".join(f"{r.operator_id}/{r.store_name}: {r.cause}" for r in never)
    return f" (Spark never evicts {named}; --drop-keys removes its keys by a predicate)"


class _Refused(Exception):
    """An edit that cannot be planned; its message is the refusal."""


def _why(exc: Exception) -> str:
    return exc.why if isinstance(exc, CollectorError) else str(exc)


def store_spec(store: StoreInfo) -> str:
    """How ``--drop-keys`` names ``store``: as ``state --operator/--store`` do."""
    return f"{store.operator_id}/{store.store_name}"


def _resolve(
    session: Any, root: str, edit: DropKeys, stores: list[StoreInfo]
) -> tuple[StoreInfo, str]:
    """The store ``edit`` names and what its predicate reads: a catalog table
    (``schema.table``, quoted), or for a transformWithState store named whole, the grouping
    keys of all its state variables."""
    from stateglass.collectors.catalog.names import quoted

    wanted = edit.store.strip()
    # Only the checkpoint's own tables: a folder below it may hold another checkpoint.
    own = [
        e
        for e in session.tables()
        if e.kind == "state" and e.operator_id is not None and e.checkpoint == root
    ]
    for entry in own:
        store = next(
            s
            for s in stores
            if s.operator_id == entry.operator_id and s.store_name == entry.store_name
        )
        names = {entry.table, f"{entry.operator_id}/{entry.state_var or entry.store_name}"}
        if store.is_transform_with_state and wanted == store_spec(store):
            variables = [e for e in own if e.operator_id == store.operator_id]
            tables = [f"{quoted(e.schema)}.{quoted(e.table)}" for e in variables]
            return store, _grouping_key_union(tables)
        if wanted.lower() not in names and wanted not in names:
            continue
        if entry.state_var is not None and not store.is_transform_with_state:
            raise _Refused(
                "a join of state format 3 or 4 (column families): dropping keys is not supported"
            )
        return store, f"{quoted(entry.schema)}.{quoted(entry.table)}"
    known = ", ".join(store_spec(s) for s in stores)
    raise _Refused(f"no store {wanted!r} (stores: {known})")


def _grouping_key_union(tables: list[str]) -> str:
    """One relation of a transformWithState store's grouping keys: each state variable's
    ``key`` (the grouping key), ``partition_id`` and ``batch_id``."""
    union = "\nUNION\n".join(f"SELECT key, partition_id, batch_id FROM {t}" for t in tables)
    return f"({union}) AS grouping_keys"


def _matched_keys(session: Any, table: str, batch: int, predicate: str) -> list[Frozen]:
    """The keys of ``table`` at ``batch`` whose rows ``predicate`` keeps, frozen."""
    sql = f"SELECT key FROM {table} WHERE batch_id = {int(batch)} AND ({predicate}\n)"
    result = session.execute(sql)
    return [_freeze(k) for k in result.table.column("key").to_pylist()]


def _freeze(value: Any) -> Frozen:
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _join_side(store: StoreInfo) -> str | None:
    """``left``/``right`` for a join store, else None."""
    side, _, name = store.store_name.partition("-")
    return side if name in JOIN_STORES and side in ("left", "right") else None


def _unit_of(
    store: StoreInfo, stores: list[StoreInfo], units: dict[tuple[int, str], _Unit]
) -> _Unit:
    side = _join_side(store)
    name = side or store.store_name
    found = units.get((store.operator_id, name))
    if found is None:
        members = [
            s
            for s in stores
            if s.operator_id == store.operator_id
            and (s.store_name == store.store_name or (side and _join_side(s) == side))
        ]
        found = units[(store.operator_id, name)] = _Unit(store.operator_id, members)
    return found


def _unit_key(store: StoreInfo, key: Frozen) -> Frozen:
    """The key a unit drops: a join's ``keyWithIndexToValue`` key without its index."""
    if _join_side(store) and store.store_name.endswith("keyWithIndexToValue"):
        return key[:-1]
    return key


def _unit_drops(cp: Checkpoint, unit: _Unit, batch: int) -> Iterator[StoreDrops]:
    """The stored keys each store of ``unit`` loses, read at ``batch``."""
    for store in unit.stores:
        if store.is_transform_with_state:
            rows = list(_grouped_keys(cp, store, batch))
        else:
            rows = list(_stored_keys(cp, store, batch))
        removed = (
            (partition, key, value)
            for partition, key, value, frozen in rows
            if _unit_key(store, frozen) in unit.keys
        )
        yield _store_drops(store, unit.operator_id, removed, len(rows), "; ".join(unit.why))


def _store_drops(
    store: StoreInfo,
    operator_id: int,
    removed: Iterable[tuple[int, bytes, bytes]],
    rows: int,
    why: str,
) -> StoreDrops:
    """One store's drops from its removed ``(partition, key, value)`` rows."""
    dropped: set[bytes] = set()
    per_partition: dict[int, int] = {}
    sample: list[tuple[int, bytes, bytes]] = []
    saved = 0
    for partition, key, value in removed:
        if key in dropped:
            continue
        dropped.add(key)
        per_partition[partition] = per_partition.get(partition, 0) + 1
        saved += len(key) + len(value)
        # A transformWithState key is one of many column families' raw keys, which no
        # single row codec renders: its dry run counts them and shows none.
        if len(sample) < SAMPLE_ROWS and not store.is_transform_with_state:
            sample.append((partition, key, value))
    return StoreDrops(
        operator_id=operator_id,
        store_name=store.store_name,
        keys=frozenset(dropped),
        rows=rows,
        per_partition=tuple(sorted(per_partition.items())),
        bytes_saved=saved,
        sample=tuple(sample),
        why=why,
    )


def _stored_rows(
    cp: Checkpoint, store: StoreInfo, batch: int
) -> Iterator[tuple[int, bytes, bytes, Any]]:
    """``(partition, key bytes, value bytes, decoded key row)`` of each stored row of
    ``store`` at ``batch``."""
    for view in views_of(store, cp.root):
        source = StateSource(cp, view.request())
        codec = source.row_codec
        for partition in source.partitions_for(batch):
            with source.decoding(partition):
                for key, value in source.load(partition, batch + 1):
                    pairs = codec.decode(key, value)
                    if pairs:
                        yield partition, key, value, pairs[0][0]


def _stored_keys(
    cp: Checkpoint, store: StoreInfo, batch: int
) -> Iterator[tuple[int, bytes, bytes, Frozen]]:
    """``(partition, key bytes, value bytes, key as the catalog gives it)`` of each stored
    row of ``store`` at ``batch``; the key goes through the catalog's own Arrow mapping, so
    it compares equal to the key a query returned."""
    rows = list(_stored_rows(cp, store, batch))
    if not rows:
        return
    codec = StateSource(cp, views_of(store, cp.root)[0].request()).row_codec
    table = row_table([("key", codec.key_schema)], [(k,) for *_, k in rows])
    for (partition, key, value, _), arrow_key in zip(
        rows, table.column("key").to_pylist(), strict=True
    ):
        yield partition, key, value, _freeze(arrow_key)


def _grouped_keys(
    cp: Checkpoint, store: StoreInfo, batch: int
) -> Iterator[tuple[int, bytes, bytes, Frozen]]:
    """:func:`_stored_keys` of a transformWithState store: every key of every column family
    (state variables, TTL indexes, both timer indexes, row counters) with its grouping key
    as the catalog gives it, the key under the rewrite's column family ids (what the
    writer's row filter sees)."""
    rows = list(grouped_rows(cp, store, batch))
    # One Arrow conversion per grouping key type, so keys compare equal to the catalog's.
    by_type: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_type.setdefault(row.grouping_schema.simple_string(), []).append(i)
    frozen: list[Frozen] = [None] * len(rows)
    for indexes in by_type.values():
        schema = rows[indexes[0]].grouping_schema
        table = row_table([("key", schema)], [(rows[i].grouping_key,) for i in indexes])
        for i, arrow_key in zip(indexes, table.column("key").to_pylist(), strict=True):
            frozen[i] = _freeze(arrow_key)
    for row, grouping_key in zip(rows, frozen, strict=True):
        yield row.partition, row.moved_key, row.value, grouping_key
