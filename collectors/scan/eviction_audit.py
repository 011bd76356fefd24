"""The eviction audit: keys Spark should already have evicted, per partition and version.

For every store whose state Spark evicts by event time (:mod:`collectors.scan.eviction_rules`),
each version a scan counts is replayed once more, this time decoding the event time of every
key (a delta or changelog is applied to the previous version's ``key -> event time`` map, as
the key-count chain does with its key set), and the keys matching Spark's eviction predicate
at the watermark of the batch that wrote the version (version = batch + 1) are counted.
Spark removes them before it commits that version, so a healthy store shows zero.

Only audited stores are read again, and only the versions the scan counted anew. The
:mod:`collectors.scan.scanner` writes the rows; :func:`overdue_examples` answers Browse on demand.

Example::

    rules = store_rules(cp, cp.stores(), has_watermark=True)
    rows, problems = audit_store(cp, rules[0], {0: [1, 2, 3]}, {0: 0, 1: 0, 2: 600000})
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.fs import FileSystem
from stateglass.collectors.scan.carry import KeyCarry
from stateglass.collectors.scan.chains import ChainTask
from stateglass.collectors.scan.eviction_rules import (
    JOIN_VALUE,
    NOT_AUDITED,
    TIMERS,
    EvictionRule,
    eviction_rules,
)
from stateglass.collectors.stores import StoreReader
from stateglass.parsers.errors import ParseError

if TYPE_CHECKING:
    # Imported when a store is audited: the row codecs are not needed by a collect of
    # stores without event-time eviction (`collect`'s start-up).
    from stateglass.collectors.checkpoints.state_reader import StateSource


@dataclass(frozen=True)
class AuditRow:
    """Overdue keys of one partition at one version."""

    operator_id: int
    store_name: str
    state_var: str
    partition_id: int
    version: int
    watermark_ms: int | None
    keys: int
    # None: the predicate cannot be evaluated (no watermark known, or a join's value side).
    overdue_keys: int | None
    oldest_event_ms: int | None


def store_rules(
    cp: Checkpoint, stores: Iterable[StoreInfo], has_watermark: bool
) -> list[EvictionRule]:
    """One rule per store (a transformWithState store: one for its event-time timers)."""
    out: list[EvictionRule] = []
    stores = list(stores)
    # A join side's input row (with the watermark metadata) is in its keyWithIndexToValue store.
    rows_of = {
        (s.operator_id, s.store_name.split("-", 1)[0]): s.value_schema
        for s in stores
        if s.store_name.endswith("-keyWithIndexToValue")
    }
    for store in stores:
        out.extend(
            eviction_rules(
                store.operator_id,
                store.operator_name,
                store.store_name,
                store.key_schema,
                store.value_schema,
                has_watermark,
                time_mode=store.time_mode,
                state_var_names=[v.name for v in store.state_variables],
                join_row_schema=rows_of.get((store.operator_id, store.store_name.split("-", 1)[0])),
                column_families=store.column_families if store.uses_column_families else (),
            )
        )
    return out


def _source(cp: Checkpoint, rule: EvictionRule, partitions: Sequence[int] | None) -> StateSource:
    from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource

    if rule.kind == TIMERS:
        request = StateRequest(
            rule.operator_id, rule.store_name, None, partitions, read_timers=True
        )
    else:
        request = StateRequest(rule.operator_id, rule.store_name, None, partitions)
    return StateSource(cp, request)


class _Timer:
    """Event time of one stored item, through the store's row codec."""

    def __init__(self, source: StateSource, rule: EvictionRule) -> None:
        self.codec = source.row_codec
        self.rule = rule

    def __call__(self, key: bytes, value: bytes | None) -> tuple[bool, int | None]:
        """``(belongs to this rule's rows, event time)``; other column families give False."""
        if value is None:
            return False, None
        if self.rule.kind == TIMERS:
            rows = self.codec.rows(key, value)
            pairs: list[tuple[Any, Any]] = [(r, None) for r in rows]
        else:
            pairs = list(self.codec.decode(key, value))
        if not pairs:
            return False, None
        times = [t for t in (self.rule.event_time(k, v) for k, v in pairs) if t is not None]
        return True, (min(times) if times else None)


def _to_ms(rule: EvictionRule, ts: int) -> int:
    return ts if rule.unit == "ms" else ts // 1000


def audit_store(
    cp: Checkpoint,
    rule: EvictionRule,
    versions: Mapping[int, Sequence[int]],
    watermarks: Mapping[int, int | None],
    tasks: Mapping[int, ChainTask] | None = None,
    carry: KeyCarry | None = None,
    fs: FileSystem | None = None,
) -> tuple[list[AuditRow], list[CheckpointError]]:
    """Audit ``versions`` (partition -> versions) of one rule's store; problems do not stop it.

    ``tasks``: the scan's chain task per partition, whose file listing and unique ids the
    store readers reuse (no listing or commit file is read again). ``carry``: each
    partition's ``key -> event time`` at the last version audited, from and for a watcher's
    previous and next scans (see :mod:`collectors.scan.carry`). ``fs``: what the tasks' readers
    read through instead of the checkpoint's (a scan's :class:`ReadMemo`)."""
    rows: list[AuditRow] = []
    problems: list[CheckpointError] = []
    if not versions:
        return rows, problems
    try:
        source = _source(cp, rule, sorted(versions))
        timer = _Timer(source, rule)
    except CheckpointError as exc:
        return rows, [exc]
    for partition, wanted in sorted(versions.items()):
        try:
            task = (tasks or {}).get(partition)
            reader = task.open_reader(fs or cp.fs) if task else source.reader(partition)
            name = (cp.root, "audit", rule.operator_id, rule.store_name, rule.state_var, partition)
            seed = carry.take(name) if carry is not None else None
            for version, items in _replay(reader, timer, sorted(wanted), seed):
                rows.append(_row(rule, partition, version, items, watermarks.get(version - 1)))
                if carry is not None and version == max(wanted):
                    carry.keep(name, version, items)
        except CheckpointError as exc:
            problems.append(exc)
        except ParseError as exc:
            problems.append(source.decode_error(partition, exc))
    return rows, problems


def _row(
    rule: EvictionRule,
    partition: int,
    version: int,
    items: dict[bytes, int | None],
    watermark_ms: int | None,
) -> AuditRow:
    times = [t for t in items.values() if t is not None]
    oldest = min(times) if times else None
    overdue: int | None = None
    if rule.audited and watermark_ms is not None:
        overdue = sum(1 for t in times if rule.is_overdue(t, watermark_ms))
    return AuditRow(
        rule.operator_id,
        rule.store_name,
        rule.state_var or "",
        partition,
        version,
        watermark_ms,
        len(items),
        overdue,
        _to_ms(rule, oldest) if oldest is not None else None,
    )


def _replay(
    reader: StoreReader,
    timer: _Timer,
    wanted: list[int],
    seed: tuple[int, dict[bytes, int | None]] | None = None,
) -> Iterator[tuple[int, dict[bytes, int | None]]]:
    """``key -> event time`` of the partition at each wanted version, replaying changes
    (from ``seed``, the map at one version, when the first wanted one follows it)."""
    rebuildable = set(reader.versions())
    change_versions = reader.change_versions()
    items: dict[bytes, int | None] | None = None
    at: int | None = None
    if seed is not None:
        at, items = seed
    for version in wanted:
        if version not in rebuildable:
            continue
        if items is not None and at == version - 1 and version in change_versions:
            for change_type, key, value in reader.changes(version):
                if change_type == "delete":
                    items.pop(key, None)
                    continue
                mine, ts = timer(key, value)
                if not mine:
                    continue
                old = items.get(key)
                # A list-state merge adds an element: the key's oldest element decides.
                if change_type == "append" and key in items and old is not None and ts is not None:
                    ts = min(ts, old)
                items[key] = ts
        else:
            items = {}
            for key, value in reader.load(version):
                mine, ts = timer(key, value)
                if mine:
                    items[key] = ts
        at = version
        yield version, items


def overdue_examples(
    cp: Checkpoint, rule: EvictionRule, version: int, watermark_ms: int, limit: int = 50
) -> list[tuple[int, Any, Any, int]]:
    """Up to ``limit`` overdue ``(partition, key row, value row, event time ms)`` at ``version``."""
    out: list[tuple[int, Any, Any, int]] = []
    for partition, _, _, k, v, ts in overdue_items(cp, rule, version, watermark_ms):
        out.append((partition, k, v, ts))
        if len(out) >= limit:
            break
    return out


def overdue_items(
    cp: Checkpoint, rule: EvictionRule, version: int, watermark_ms: int
) -> Iterator[tuple[int, bytes, bytes, Any, Any, int]]:
    """``(partition, key bytes, value bytes, key row, value row, event time ms)`` of each
    row of ``rule``'s store at ``version`` Spark's eviction at ``watermark_ms`` removes."""
    source = _source(cp, rule, None)
    codec = source.row_codec
    for partition in source.partitions_for(version - 1):
        with source.decoding(partition):
            for key, value in source.load(partition, version):
                if rule.kind == TIMERS:
                    pairs: list[tuple[Any, Any]] = [(r, None) for r in codec.rows(key, value)]
                else:
                    pairs = list(codec.decode(key, value))
                for k, v in pairs:
                    ts = rule.event_time(k, v)
                    if ts is not None and rule.is_overdue(ts, watermark_ms):
                        yield partition, key, value, k, v, _to_ms(rule, ts)


def rule_rows(root: str, rules: Iterable[EvictionRule]) -> list[dict[str, Any]]:
    """``eviction_rules`` table rows."""
    return [
        {
            "checkpoint": root,
            "operator_id": r.operator_id,
            "store_name": r.store_name,
            "state_var": r.state_var or "",
            "operator_name": r.operator_name,
            "kind": r.kind,
            "audited": r.audited,
            "predicate": r.predicate,
            "event_time_field": r.field or None,
            "cause": r.cause,
            "fix": r.fix,
        }
        for r in rules
    ]


def audit_rows(root: str, rows: Iterable[AuditRow]) -> list[dict[str, Any]]:
    """``eviction_audit`` table rows."""
    return [
        {
            "checkpoint": root,
            "operator_id": r.operator_id,
            "store_name": r.store_name,
            "state_var": r.state_var,
            "partition_id": r.partition_id,
            "version": r.version,
            "watermark_ms": r.watermark_ms,
            "keys": r.keys,
            "overdue_keys": r.overdue_keys,
            "oldest_event_ms": r.oldest_event_ms,
        }
        for r in rows
    ]


def run_audit(
    cp: Checkpoint,
    stores: Sequence[StoreInfo],
    counted: Mapping[tuple[int, str, int], tuple[ChainTask, Sequence[int]]],
    watermarks: Mapping[int, int | None],
    carry: KeyCarry | None = None,
    fs: FileSystem | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[CheckpointError]]:
    """The scan's step: rules of every store, and the audit of the versions it just counted
    (``counted``: (operator, store, partition) -> versions). Returns table rows and problems."""
    root = cp.root
    has_watermark = any((w or 0) > 0 for w in watermarks.values())
    rules = store_rules(cp, stores, has_watermark)
    rows: list[AuditRow] = []
    problems: list[CheckpointError] = []
    for i, rule in enumerate(rules):
        if not tracked(rule):
            continue
        mine = {
            part: found
            for (op, store, part), found in counted.items()
            if op == rule.operator_id and store == rule.store_name and found[1]
        }
        versions = {part: vs for part, (_, vs) in mine.items()}
        tasks = {part: task for part, (task, _) in mine.items()}
        found, trouble = audit_store(cp, rule, versions, watermarks, tasks, carry, fs)
        rows.extend(found)
        if trouble:
            # The chains report unreadable files already; rows StateGlass cannot decode are
            # not damage (``stateglass state`` says the same): the store is just not audited.
            problems.extend(trouble)
            rules[i] = replace(
                rule, kind=NOT_AUDITED, cause=f"its rows could not be read: {trouble[0].why}"
            )
    return rule_rows(root, rules), audit_rows(root, rows), problems


SKIPPED = "the eviction audit was switched off for this collect (--no-eviction-audit)"


def skipped_audit(
    cp: Checkpoint, stores: Sequence[StoreInfo], watermarks: Mapping[int, int | None]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[CheckpointError]]:
    """The rules alone, for a scan told not to audit: stores that would be audited say why
    they were not; never-evicted stores keep their cause and fix (that needs no key)."""
    has_watermark = any((w or 0) > 0 for w in watermarks.values())
    rules = [
        replace(rule, kind=NOT_AUDITED, cause=SKIPPED) if rule.audited else rule
        for rule in store_rules(cp, stores, has_watermark)
    ]
    return rule_rows(cp.root, rules), [], []


def tracked(rule: EvictionRule) -> bool:
    """Whether a rule's store is replayed: audited ones, and a join's value side (oldest
    event time, to tell a join without a time bound)."""
    return rule.audited or (rule.kind == JOIN_VALUE and bool(rule.path))
