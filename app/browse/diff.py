"""What changed between two versions: keys added, removed, and keys whose value changed.

Rows are matched by their stored key bytes (what Spark's store itself compares), within a
partition, so list state is compared as whole lists (read unflattened) and map state per
user key. A value counts as changed when its stored bytes differ.

Example::

    result = compute_diff(StateView("/data/cp"), before=11, after=12)
    print(result.counts)                     # {"added": 3, "removed": 1, "changed": 7}
    print(diff_page(result, "changed", page=1, size=50).to_pylist())
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stateglass.app.browse.cells import PARTITION_COLUMN, cell_text
from stateglass.app.browse.store import (
    PartitionCache,
    PartitionData,
    iter_partitions,
    key_json_renderer,
    partition_data,
)
from stateglass.app.browse.table import decode_rows, flattener, last
from stateglass.app.errors import AppError
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import StateView, identity_width, open_source
from stateglass.collectors.errors import MissingVersion
from stateglass.parsers.state_rows import Row

KINDS = ("added", "removed", "changed")
# Results hold their partitions' bytes beyond the partition cache's budget: keep very few.
RECENT_DIFFS = 2
# Share of a version's keys up to which point reads of the candidates beat two whole scans
# (up to 10,000 keys point reads are cheap whatever the share).
MAX_POINT_READS = 0.25


@dataclass(frozen=True)
class PartitionDiff:
    """Item numbers, in store order: added (in ``after``), removed (in ``before``), changed."""

    before: PartitionData
    after: PartitionData
    added: np.ndarray
    removed: np.ndarray
    changed_before: np.ndarray
    changed_after: np.ndarray

    def count(self, kind: str) -> int:
        return len(
            {"added": self.added, "removed": self.removed, "changed": self.changed_after}[kind]
        )


@dataclass(frozen=True)
class DiffResult:
    view: StateView  # the keyed view (one row per stored key)
    before: int
    after: int
    parts: tuple[PartitionDiff, ...]

    @property
    def counts(self) -> dict[str, int]:
        return {k: sum(p.count(k) for p in self.parts) for k in KINDS}


class _Recent:
    """The last few diff results (thread-safe: sessions share it)."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[StateView, int, int, int | None], DiffResult] = OrderedDict()

    def get(self, key: tuple[StateView, int, int, int | None]) -> DiffResult | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[StateView, int, int, int | None], result: DiffResult) -> None:
        with self._lock:
            self._items[key] = result
            while len(self._items) > self.kept:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_RECENT = _Recent(RECENT_DIFFS)


def diff_partition(before: PartitionData, after: PartitionData) -> PartitionDiff:
    """Match the two versions' items on their key bytes (one hash lookup per key, in Arrow)."""
    where = pc.index_in(after.keys, value_set=before.keys)  # after item -> before item
    found = where.is_valid().to_numpy(zero_copy_only=False)
    added = np.flatnonzero(~found)
    bj = np.flatnonzero(found)
    bi = where.filter(where.is_valid()).to_numpy(zero_copy_only=False).astype(np.int64)
    kept = np.zeros(before.num_items, dtype=bool)
    kept[bi] = True
    removed = np.flatnonzero(~kept)
    same = pc.equal(before.values.take(pa.array(bi)), after.values.take(pa.array(bj)))
    differ = ~same.to_numpy(zero_copy_only=False)
    return PartitionDiff(before, after, added, removed, bi[differ], bj[differ])


def changed_keys(
    source: StateSource, partition: int, before: int, after: int
) -> list[bytes] | None:
    """Every key the change files of ``before + 1 .. after`` name, in file order; else the
    keys of the files the two versions do not share (a RocksDB store without changelogs:
    its versions' zips share most SSTs); None when neither can say.

    Keys no change record (or unshared file) names hold the same bytes in both versions,
    so the diff of the two versions is the diff of these keys alone.
    """
    if after <= before:
        return None
    seen: dict[bytes, None] = {}
    try:
        for version in range(before + 1, after + 1):
            for _, key, _ in source.changes(partition, version):
                seen[key] = None
    except MissingVersion:
        return unshared_keys(source, partition, before, after)
    return list(seen)


def unshared_keys(
    source: StateSource, partition: int, before: int, after: int
) -> list[bytes] | None:
    """:meth:`StateSource.differing_keys`, unless they are so many (a compaction rewrote
    the store) that point reads would cost more than reading both versions whole."""
    if before == 0:
        return None
    keys = source.differing_keys(partition, before, after)
    if keys is None:
        return None
    recorded = source.reader(partition).recorded_num_keys(after)
    if recorded is not None and len(keys) > max(recorded * MAX_POINT_READS, 10_000):
        return None
    return keys


def _narrowed(
    source: StateSource, partition: int, before: int, after: int, keys: list[bytes]
) -> tuple[PartitionData, PartitionData]:
    """Both versions of ``partition`` restricted to ``keys``: one replay of its chain."""
    found = dict(source.lookup(partition, keys, [before, after]))

    def data(values: dict[bytes, bytes]) -> PartitionData:
        return partition_data(source, partition, [(k, values[k]) for k in keys if k in values])

    return data(found[before]), data(found[after])


def iter_diff(
    view: StateView,
    before: int,
    after: int,
    partition: int | None = None,
    *,
    cache: PartitionCache | None = None,
    jobs: int = 1,
) -> Iterator[tuple[float, DiffResult | None]]:
    """(fraction read, None) per partition compared, then (1.0, the result).

    A partition whose versions after ``before`` all have change files (HDFS deltas, RocksDB
    changelogs), or whose two versions are RocksDB zips sharing most SSTs, is compared on
    the keys those name only (:func:`changed_keys`), so neither version is built whole or
    cached; the others are read whole (through the partition cache). The last few results
    are kept, so paging through one diff does not join it again.
    """
    keyed = view.keyed(open_source(view).row_codec)
    source = open_source(keyed)
    held = source.partitions_for(after - 1)
    if held != source.partitions_for(before - 1):
        # Keys moved between partitions: a partition-by-partition diff would call every
        # moved key added in one and removed in another.
        raise AppError(
            f"versions {before} and {after} lie on both sides of a repartition (Spark moved "
            "the keys to another partition count): compare versions on one side of it"
        )
    partitions = held if partition is None else [partition]
    known = _RECENT.get((keyed, before, after, partition))
    if known is not None:
        yield 1.0, known
        return
    kwargs: dict[str, Any] = {"jobs": jobs} if cache is None else {"jobs": jobs, "cache": cache}
    narrow = {p: changed_keys(source, p, before, after) for p in partitions}
    whole = [p for p in partitions if narrow[p] is None]
    olds = iter_partitions(keyed, before, whole, **kwargs)
    news = iter_partitions(keyed, after, whole, **kwargs)
    parts = []
    for n, p in enumerate(partitions, start=1):
        keys = narrow[p]
        if keys is not None:
            old, new = _narrowed(source, p, before, after, keys)
        else:
            old, new = next(olds), next(news)
        parts.append(diff_partition(old, new))
        yield n / len(partitions), None
    result = DiffResult(keyed, before, after, tuple(parts))
    _RECENT.put((keyed, before, after, partition), result)
    yield 1.0, result


def compute_diff(view: StateView, before: int, after: int, **kwargs: Any) -> DiffResult:
    """:func:`iter_diff`'s result."""
    result = last(iter_diff(view, before, after, **kwargs))[1]
    assert result is not None
    return result


def _slice(
    result: DiffResult, kind: str, offset: int, size: int
) -> list[tuple[PartitionDiff, np.ndarray, np.ndarray | None]]:
    """(partition diff, item numbers, matching 'before' numbers) of one page of ``kind``."""
    out = []
    start = 0
    for part in result.parts:
        if kind == "added":
            items, before = part.added, None
        elif kind == "removed":
            items, before = part.removed, None
        else:
            items, before = part.changed_after, part.changed_before
        lo, hi = max(offset - start, 0), min(offset + size - start, len(items))
        if lo < hi:
            out.append((part, items[lo:hi], None if before is None else before[lo:hi]))
        start += len(items)
        if start >= offset + size:
            break
    return out


def diff_page(result: DiffResult, kind: str, page: int = 1, size: int = 50) -> pa.Table:
    """One page of added or removed rows (flat columns), or of changes.

    Changes come one row per changed field: ``key`` (its JSON text, first: it says which
    row changed), ``partition_id``, ``field``, and ``before`` and ``after`` as text (fields
    of any type share those columns; floats as :func:`stateglass.app.browse.cells.cell_text`).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    source = open_source(result.view)
    codec = source.row_codec
    flat = flattener(tuple(codec.columns))
    offset = (max(1, page) - 1) * size
    chosen = _slice(result, kind, offset, size)
    if kind != "changed":
        rows: list[tuple[int, Row]] = []
        for part, items, _ in chosen:
            data = part.after if kind == "added" else part.before
            rows.extend(decode_rows(source, data, _rows_of(data, items)))
        return flat.table(rows)
    # One row per changed field: the key as one JSON column keeps before/after in view.
    width = 1 + sum(len(leaves) for _, leaves in flat.groups[: identity_width(codec)])
    render_key = key_json_renderer(codec)
    columns: dict[str, list[Any]] = {
        n: [] for n in ("key", PARTITION_COLUMN, "field", "before", "after")
    }
    for part, items, befores in chosen:
        assert befores is not None
        new_rows = decode_rows(source, part.after, _rows_of(part.after, items))
        old_rows = decode_rows(source, part.before, _rows_of(part.before, befores))
        for (p, new), (_, old) in zip(new_rows, old_rows, strict=True):
            new_cells, old_cells = flat.cells(p, new), flat.cells(p, old)
            key = render_key(new)
            for n in range(width, len(flat.names)):
                if new_cells[n] != old_cells[n] or type(new_cells[n]) is not type(old_cells[n]):
                    columns[PARTITION_COLUMN].append(p)
                    columns["field"].append(flat.names[n])
                    columns["before"].append(cell_text(old_cells[n]))
                    columns["after"].append(cell_text(new_cells[n]))
                    columns["key"].append(key)
    types = [pa.string(), pa.int32(), pa.string(), pa.string(), pa.string()]
    return pa.table(
        [pa.array(v, type=t) for v, t in zip(columns.values(), types, strict=True)],
        names=list(columns),
    )


def _rows_of(data: PartitionData, items: Sequence[int] | np.ndarray) -> list[int]:
    """Row numbers of items; in a keyed view each item is one row."""
    assert data.row_item is None, "diff reads one row per stored key"
    return [int(i) for i in items]
