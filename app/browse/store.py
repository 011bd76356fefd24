"""One state version of one partition, held compactly, and a bounded cache of them.

A partition's state is kept as stored: the key and value bytes of every item that gives rows,
in two Arrow binary arrays (about the size of the files' payloads, not of Python objects).
Rows are decoded only when shown (a page, a diff's changes, one key's history), so reading
a 1M-key version costs the reader's time plus two array copies, and a page costs
microseconds. Searching keys needs their text: it is rendered once, on the first search, and
kept beside the bytes.

Partitions come in partition order, so that the first page can be shown as soon as the
partitions before it are in. They can be read by forked worker processes (``jobs``), which
pays off only when reading a partition costs much more than pickling it back.
"""

from __future__ import annotations

import gc
import multiprocessing
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stateglass.app.errors import AppError
from stateglass.app.render.bytes_to_json import state_blob_encoder
from stateglass.app.render.java_text import json_quote
from stateglass.app.render.rows_to_json import render_row
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import StateView, identity_width, open_source
from stateglass.parsers.sparktypes import DataType, StructField, StructType
from stateglass.parsers.state_rows import Row, RowCodec

# Enough for a few 1M-key versions (about 70 MB each for short keys and values).
DEFAULT_CACHE_BYTES = 400 * 1024 * 1024


@dataclass
class PartitionData:
    """The items of one partition at one version that give rows, in the reader's order.

    ``row_item``/``row_sub`` map a row to (item, row within the item's rows) when an item
    gives several rows (list state, one row per element); both are None when items and rows
    are one to one.
    """

    partition: int
    keys: pa.Array
    values: pa.Array
    row_item: np.ndarray | None = None
    row_sub: np.ndarray | None = None
    # Per item: the key's JSON text without field names, for searching (see key_search_text).
    search: pa.Array | None = field(default=None)

    @property
    def num_rows(self) -> int:
        return len(self.keys) if self.row_item is None else len(self.row_item)

    @property
    def num_items(self) -> int:
        return len(self.keys)

    @property
    def nbytes(self) -> int:
        total = self.keys.nbytes + self.values.nbytes
        for extra in (self.row_item, self.row_sub):
            total += 0 if extra is None else extra.nbytes
        return total + (0 if self.search is None else self.search.nbytes)

    def item(self, row: int) -> tuple[int, int]:
        """(item index, row within the item) of row ``row``."""
        if self.row_item is None or self.row_sub is None:
            return row, 0
        return int(self.row_item[row]), int(self.row_sub[row])

    def row_items(self) -> np.ndarray:
        """Item index of every row."""
        if self.row_item is None:
            return np.arange(len(self.keys), dtype=np.int64)
        return self.row_item

    def decode(self, codec: RowCodec, rows: Sequence[int]) -> list[Row]:
        """Output rows (``codec.columns`` order) of the given row numbers."""
        out: list[Row] = []
        cache: dict[int, list[Row]] = {}
        for row in rows:
            item, sub = self.item(row)
            decoded = cache.get(item)
            if decoded is None:
                decoded = codec.rows(self.keys[item].as_py(), self.values[item].as_py())
                cache = {item: decoded}  # rows of one item are consecutive
            out.append(decoded[sub])
        return out


def every_item_a_row(codec: RowCodec) -> bool:
    """Whether every stored item gives exactly one row (no column families to drop, no
    lists to flatten): then a partition's rows are its items, whatever their values."""
    spec = codec.spec
    if spec.provider == "hdfs" and spec.state_kind is None and not spec.multi_value:
        return True
    return codec.raw_capable and spec.cf_id is None  # one row per item, checked when decoded


def _index(codec: RowCodec, items: list[tuple[bytes, bytes]]) -> tuple[list[int], list[int]]:
    """(kept item positions, rows per kept item): items of other column families give none."""
    if every_item_a_row(codec):
        return list(range(len(items))), []
    if codec.raw_capable:
        payloads = codec.payloads
        return [i for i, (k, v) in enumerate(items) if payloads(k, v) is not None], []
    kept, counts = [], []
    rows = codec.rows
    for i, (k, v) in enumerate(items):
        n = len(rows(k, v))
        if n:
            kept.append(i)
            counts.append(n)
    if all(n == 1 for n in counts):
        counts = []
    return kept, counts


def read_partition(source: StateSource, version: int, partition: int) -> PartitionData:
    """Rebuild one partition at ``version`` (``CheckpointError`` naming the file if bad)."""
    codec = source.row_codec
    if codec.grouped:
        raise AppError("unflattened map state is read a partition at a time, not row by row")
    return partition_data(source, partition, source.load_items(partition, version))


def partition_data(
    source: StateSource, partition: int, items: list[tuple[bytes, bytes]]
) -> PartitionData:
    """``items`` (stored key and value bytes) as a partition's rows: those of other column
    families dropped, list state's elements indexed."""
    codec = source.row_codec
    with source.decoding(partition):
        kept, counts = _index(codec, items)
    if len(kept) != len(items):
        items = [items[i] for i in kept]
    keys = pa.array([k for k, _ in items], type=pa.large_binary())
    values = pa.array([v for _, v in items], type=pa.large_binary())
    if not counts:
        return PartitionData(partition, keys, values)
    sizes = np.asarray(counts, dtype=np.int64)
    row_item = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    row_sub = np.arange(len(row_item), dtype=np.int64) - starts
    return PartitionData(partition, keys, values, row_item, row_sub)


# ---- key text ------------------------------------------------------------------------------


def identity_columns(codec: RowCodec) -> StructType:
    """The columns that name a row, as one struct (``key``; or ``key``, ``user_map_key``)."""
    cols = codec.columns[: identity_width(codec)]
    return StructType(tuple(StructField(name, dt) for name, dt in cols))


def key_json_renderer(codec: RowCodec, zone: str = "UTC") -> Callable[[Row], str]:
    """Row -> the JSON text of what names it: the key's JSON as Spark writes it.

    One naming column gives that column's text (``{"k":"a"}``); two give an object of both
    (``{"key":{…},"user_map_key":{…}}``).
    """
    ident = identity_columns(codec)
    if len(ident.fields) == 1:
        render = render_row(StructType((StructField("v", ident.fields[0].data_type),)), zone)
        return lambda row: render((row[0],))[5:-1]
    render_all = render_row(ident, zone)
    width = len(ident.fields)
    return lambda row: render_all(row[:width])


def _field_names(dt: DataType, out: set[str]) -> None:
    if isinstance(dt, StructType):
        for f in dt.fields:
            out.add(f.name)
            _field_names(f.data_type, out)
    for child in ("element_type", "key_type", "value_type"):
        sub = getattr(dt, child, None)
        if isinstance(sub, DataType):
            _field_names(sub, out)


def _names_pattern(codec: RowCodec) -> str:
    """A regex for ``"name":`` of every field name in the key, to leave only values.

    Inside a JSON string a quote is written ``\\"``, so ``"name":`` never matches inside one.
    """
    names: set[str] = set()
    _field_names(identity_columns(codec), names)
    if not names:
        return ""
    alternatives = "|".join(re.escape(json_quote(n)[1:-1]) for n in sorted(names))
    return f'"(?:{alternatives})":'


def key_search_text(codec: RowCodec, data: PartitionData, zone: str = "UTC") -> pa.Array:
    """Per item, the key's JSON text with field names taken out: what a key search looks in."""
    ident = identity_columns(codec)
    n = data.num_items
    keys = data.keys.to_pylist()
    texts: list[str]
    if codec.raw_capable and len(ident.fields) == 1:
        compiled = _key_texts_compiled(codec, keys, zone)
        if len(compiled) != n:
            raise AppError(f"key texts: {len(compiled)} for {n} keys")  # a bug, not bad input
        return _strip_names(codec, compiled)
    render = key_json_renderer(codec, zone)
    values = data.values.to_pylist()
    rows = codec.rows
    texts = [render(rows(keys[i], values[i])[0]) for i in range(n)]
    return _strip_names(codec, pa.array(texts, type=pa.large_string()))


def _strip_names(codec: RowCodec, texts: pa.Array) -> pa.Array:
    pattern = _names_pattern(codec)
    return pc.replace_substring_regex(texts, pattern, "") if pattern else texts


_EMPTY = StructType(())
_HEAD = '{"key":'
_TAIL = ',"value":{},"partition_id":0}'


def _key_texts_compiled(codec: RowCodec, keys: list[bytes], zone: str) -> pa.Array:
    """Key JSON texts through the State Data Source line renderer (compiled when it can be).

    Lines are rendered with an empty value struct, so each is the key's text between a
    fixed head and a fixed tail: about twice as fast as one encoder call per key.
    """
    payloads = codec.payloads
    if codec.spec.provider == "hdfs":
        pairs: Iterable[tuple[bytes, bytes]] = ((k, b"") for k in keys)
    else:
        pairs = ((p[0], b"") for k in keys if (p := payloads(k, None)) is not None)
    data, _ = state_blob_encoder(codec.key_schema, _EMPTY, zone)(pairs, 0)
    lines = pa.array(data.decode("utf-8").split("\n")[:-1], type=pa.large_string())
    return pc.utf8_slice_codeunits(lines, len(_HEAD), -len(_TAIL))


# ---- the cache ----------------------------------------------------------------------------

CacheKey = tuple[StateView, int, int]  # (view, version, partition)


class PartitionCache:
    """Least recently used partitions, bounded by their bytes. Shared by every session."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[CacheKey, PartitionData] = OrderedDict()
        # Each entry's bytes as put, and their sum: summing them at every put made reading a
        # version of N partitions cost N² size look-ups.
        self._sizes: dict[CacheKey, int] = {}
        self._total = 0

    def get(self, key: CacheKey) -> PartitionData | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: CacheKey, data: PartitionData) -> None:
        with self._lock:
            self._total -= self._sizes.get(key, 0)
            self._items[key] = data
            self._items.move_to_end(key)
            self._sizes[key] = data.nbytes
            self._total += self._sizes[key]
            # The newest entry stays even when it alone is over the budget: it is in use.
            while self._total > self.max_bytes and len(self._items) > 1:
                dropped, _ = self._items.popitem(last=False)
                self._total -= self._sizes.pop(dropped)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._sizes.clear()
            self._total = 0

    def stats(self) -> tuple[int, int]:
        """(cached versions, bytes): a version counts once however many partitions it has."""
        with self._lock:
            versions = {(view, version) for view, version, _ in self._items}
            return len(versions), self._total


CACHE = PartitionCache()


# ---- reading many partitions ---------------------------------------------------------------

# Set in the parent just before the fork; read by the workers: (source, version, search,
# partitions already read but not yet searchable). The lock keeps sessions' forks apart.
_FORK_LOCK = threading.Lock()
_JOB: tuple[StateSource, int, bool, dict[int, PartitionData]] | None = None


def _prepare(
    source: StateSource, version: int, partition: int, search: bool, have: PartitionData | None
) -> PartitionData:
    data = have if have is not None else read_partition(source, version, partition)
    if search and data.search is None:
        with source.decoding(partition):
            search_text = key_search_text(source.row_codec, data)
        data = PartitionData(
            data.partition, data.keys, data.values, data.row_item, data.row_sub, search_text
        )
    return data


def _work(partition: int) -> PartitionData:
    assert _JOB is not None
    source, version, search, have = _JOB
    return _prepare(source, version, partition, search, have.get(partition))


def _forked(
    source: StateSource,
    version: int,
    partitions: list[int],
    search: bool,
    have: dict[int, PartitionData],
    jobs: int,
) -> Iterator[PartitionData]:
    """``_prepare`` of each partition, yielded in partition order.

    The first is read here, so the first page does not wait for a fork or a pickle; worker
    processes read the others meanwhile.
    """
    global _JOB
    # A pool terminated early (the page re-ran) kills workers with SIGTERM, skipping their
    # cleanup: their RocksDB copies go under one directory that is removed here.
    scratch = tempfile.mkdtemp(prefix="stateglass-browse-")
    try:
        with _FORK_LOCK:
            _JOB = (source, version, search, have)
            # Objects that exist before the fork stay out of the workers' garbage
            # collections, which would otherwise touch (and copy) every page of the heap.
            gc.freeze()
            try:
                ctx = multiprocessing.get_context("fork")
                workers = max(1, min(jobs - 1, len(partitions) - 1))
                pool = ctx.Pool(workers, initializer=_use_tempdir, initargs=(scratch,))
            finally:
                gc.unfreeze()
                _JOB = None
        with pool:
            rest = pool.imap(_work, partitions[1:])
            first = partitions[0]
            yield _prepare(source, version, first, search, have.get(first))
            yield from rest
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _use_tempdir(path: str) -> None:
    """Worker start: temporary files (RocksDB restores) go under the pool's scratch dir."""
    tempfile.tempdir = path


def iter_partitions(
    view: StateView,
    version: int,
    partitions: Sequence[int],
    *,
    search: bool = False,
    cache: PartitionCache = CACHE,
    jobs: int = 1,
) -> Iterator[PartitionData]:
    """Each of ``partitions`` at ``version``, in order, from the cache or read.

    ``search`` also renders the keys' search text. With ``jobs`` > 1, the first missing
    partition is read here and ``jobs - 1`` forked workers read the others. The default is
    1: measured on a 1M-key version (docs/benchmarks.md), handing partitions back from
    workers costs more than reading them here.
    """
    source = open_source(view)
    keys: list[CacheKey] = [(view, version, p) for p in partitions]
    found = {k: cache.get(k) for k in keys}
    missing = [k[2] for k, d in found.items() if d is None or (search and d.search is None)]
    have = {k[2]: d for k, d in found.items() if d is not None}
    fresh: Iterator[PartitionData]
    if jobs > 1 and len(missing) > 1 and "fork" in multiprocessing.get_all_start_methods():
        fresh = _forked(source, version, missing, search, have, jobs)
    else:
        fresh = (_prepare(source, version, p, search, have.get(p)) for p in missing)
    try:
        for key in keys:
            data = found[key]
            if data is None or (search and data.search is None):
                data = next(fresh)
                cache.put(key, data)
            yield data
    finally:
        close = getattr(fresh, "close", None)
        if close is not None:
            close()


def load_all(
    view: StateView, version: int, partitions: Sequence[int], **kwargs: Any
) -> list[PartitionData]:
    """:func:`iter_partitions`, all at once."""
    return list(iter_partitions(view, version, partitions, **kwargs))
