"""Pages of one state version: partition filter, key search, page by page.

Example::

    request = PageRequest(StateView("/data/cp"), version=12, search="user0", page=1)
    for update in iter_page(request):
        print(f"{update.partitions_done}/{update.partitions_total}", update.rows_seen)
    print(update.total, update.table.to_pylist())

Partitions are read in order, so page N is final as soon as the partitions read so far hold
its last row: the first page of a 1M-key version comes with the first partition, and the
total when the last one is in.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stateglass.app.browse.cells import Flattener
from stateglass.app.browse.store import (
    PartitionCache,
    PartitionData,
    iter_partitions,
    key_json_renderer,
)
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import StateView, open_source
from stateglass.parsers.state_rows import Column, Row

MAX_PAGE_SIZE = 1000
# A page's schema metadata: each row's key as Spark's JSON (a JSON list), for links to the
# key's history; the columns stay what the reader returns.
KEY_JSON = b"stateglass.key_json"
T = TypeVar("T")


@lru_cache(maxsize=64)
def flattener(columns: tuple[Column, ...]) -> Flattener:
    return Flattener(columns)


@dataclass(frozen=True)
class PageRequest:
    """One page of one version. ``search`` is a case-insensitive substring of the key."""

    view: StateView
    version: int
    partition: int | None = None
    search: str = ""
    page: int = 1
    page_size: int = 50

    @property
    def offset(self) -> int:
        return (max(1, self.page) - 1) * self.page_size


@dataclass(frozen=True)
class PageUpdate:
    """Progress of a page: ``table`` once the page is known, ``total`` once all is read."""

    partitions_done: int
    partitions_total: int
    rows_seen: int
    table: pa.Table | None
    total: int | None

    @property
    def fraction(self) -> float:
        return self.partitions_done / self.partitions_total if self.partitions_total else 1.0


def matching_rows(data: PartitionData, search: str) -> np.ndarray | None:
    """Row numbers whose key contains ``search`` (any case); None means every row."""
    if not search:
        return None
    assert data.search is not None, "read with search=True"
    hits = pc.match_substring(data.search, pattern=search, ignore_case=True)
    items = hits.to_numpy(zero_copy_only=False)
    if data.row_item is None:
        return np.flatnonzero(items)
    return np.flatnonzero(items[data.row_item])


def decode_rows(
    source: StateSource, data: PartitionData, rows: Sequence[int]
) -> list[tuple[int, Row]]:
    """(partition, output row) of the given row numbers, errors naming the store."""
    with source.decoding(data.partition):
        return [(data.partition, r) for r in data.decode(source.row_codec, rows)]


def page_table(
    source: StateSource,
    parts: Sequence[tuple[PartitionData, np.ndarray | None]],
    offset: int,
    size: int,
) -> pa.Table:
    """Rows ``offset .. offset + size`` of the concatenated (partition, matching rows)."""
    flat = flattener(tuple(source.row_codec.columns))
    picked: list[tuple[int, Row]] = []
    start = 0
    for data, rows in parts:
        count = data.num_rows if rows is None else len(rows)
        lo, hi = max(offset - start, 0), min(offset + size - start, count)
        if lo < hi:
            wanted = range(lo, hi) if rows is None else [int(r) for r in rows[lo:hi]]
            picked.extend(decode_rows(source, data, wanted))
        start += count
        if start >= offset + size:
            break
    table = flat.table(picked)
    try:
        render = key_json_renderer(source.row_codec)
        keys = [render(row) for _, row in picked]
    except (ValueError, IndexError, TypeError):
        # A view with no key to name its rows (nothing to link to): the page as it is.
        return table
    return table.replace_schema_metadata({KEY_JSON: json.dumps(keys).encode()})


def key_jsons(table: pa.Table) -> list[str] | None:
    """Each row's key as Spark's JSON, when the page carries them (:data:`KEY_JSON`)."""
    found = (table.schema.metadata or {}).get(KEY_JSON)
    return None if found is None else [str(k) for k in json.loads(found)]


def one_row_per_key(view: StateView) -> bool:
    """Whether the view has one row per stored key, so the collector's key counts are its
    row counts: a plain store (not a state variable, column family or multi-value store)."""
    if view.state_var is not None or view.read_timers:
        return False
    spec = open_source(view).row_codec.spec
    return spec.state_kind is None and spec.cf_id is None and not spec.multi_value


def iter_page(
    request: PageRequest,
    *,
    cache: PartitionCache | None = None,
    jobs: int = 1,
    total: int | None = None,
) -> Iterator[PageUpdate]:
    """Progress while partitions are read; the last update has the page and the total.

    A known ``total`` (the collector's key count, for an unsearched :func:`one_row_per_key`
    view) ends the reading once the page is full: the other partitions are not read to count.
    """
    source = open_source(request.view)
    held = source.partitions_for(request.version - 1)  # a repartition changes them
    partitions = held if request.partition is None else [request.partition]
    size = max(1, min(request.page_size, MAX_PAGE_SIZE))
    offset = request.offset
    kwargs = {} if cache is None else {"cache": cache}
    parts: list[tuple[PartitionData, np.ndarray | None]] = []
    seen = 0
    table: pa.Table | None = None
    yield PageUpdate(0, len(partitions), 0, None, None)
    loaded = iter_partitions(
        request.view,
        request.version,
        partitions,
        search=bool(request.search),
        jobs=jobs,
        **kwargs,
    )
    for done, data in enumerate(loaded, start=1):
        rows = matching_rows(data, request.search)
        parts.append((data, rows))
        seen += data.num_rows if rows is None else len(rows)
        if table is None and seen >= offset + size:
            table = page_table(source, parts, offset, size)
        if table is not None and total is not None and done < len(partitions):
            yield PageUpdate(len(partitions), len(partitions), seen, table, total)
            return
        yield PageUpdate(done, len(partitions), seen, table, None)
    if table is None:
        table = page_table(source, parts, offset, size)
    yield PageUpdate(len(partitions), len(partitions), seen, table, seen)


def last(items: Iterable[T]) -> T:
    """The last of ``items`` (progress generators end with their result)."""
    tail = deque(items, maxlen=1)
    if not tail:
        raise ValueError("no items")
    return tail[0]


def read_page(
    request: PageRequest,
    *,
    cache: PartitionCache | None = None,
    jobs: int = 1,
    total: int | None = None,
) -> PageUpdate:
    """The final update of :func:`iter_page`: the page and the total."""
    return last(iter_page(request, cache=cache, jobs=jobs, total=total))
