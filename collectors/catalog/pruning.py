"""Which (partition, batch) pairs a pushed-down filter can keep, decided without reading any.

DuckDB hands a source the predicates it could translate, as one Arrow expression. Arrow
itself decides what they leave: each candidate becomes an empty fragment whose *guarantee*
is ``partition_id == p and batch_id == b`` (or a range of batch ids), and
``Dataset.get_fragments(filter)`` keeps exactly the fragments the filter may hold rows of,
however the filter mixes them with other columns. Nothing is opened: the fragments point
nowhere.

Example::

    keep = pairs_kept(schema, [(0, 7), (1, 7)], ds.field("partition_id") == 1)  # [(1, 7)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

# The number of a table among those sharing one registered source (``sources.SharedTable``).
TABLE_ID_NAME = "_sg_table"

# Batch ids no checkpoint holds: a filter that keeps both says nothing about batch_id.
_BELOW = -1
_ABOVE = 1 << 62


def __getattr__(name: str) -> Any:
    # pyarrow loads at first use: the package is imported for names alone.
    if name == "TABLE_ID":
        import pyarrow as pa

        return pa.field(TABLE_ID_NAME, pa.int32())
    raise AttributeError(name)


def _kept(schema: pa.Schema, guarantees: Sequence[pc.Expression], flt: pc.Expression) -> list[int]:
    """Indices of the guarantees ``flt`` may hold rows of."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    if schema.get_field_index(TABLE_ID_NAME) < 0:
        # A table's own pruning sees the filter its shared source got, which names it.
        schema = schema.append(pa.field(TABLE_ID_NAME, pa.int32()))

    fs = pafs.LocalFileSystem()
    fmt = ds.IpcFileFormat()
    fragments = [
        fmt.make_fragment(str(i), filesystem=fs, partition_expression=g)
        for i, g in enumerate(guarantees)
    ]
    index = ds.FileSystemDataset(fragments, schema, fmt, fs)
    return [int(f.path) for f in index.get_fragments(filter=flt)]


def _batch_is(b: int) -> Any:
    import pyarrow.dataset as ds

    return ds.field("batch_id") == b


def selects_batches(schema: pa.Schema, flt: pc.Expression | None) -> bool:
    """Whether ``flt`` picks batches by value (``=``, ``IN``, ``BETWEEN``, ``<``, ``>``…).

    A filter that would keep a batch below 0 and one beyond any checkpoint's says nothing
    about the batch: the table then reads the last committed batch.
    """
    if flt is None:
        return False
    return len(_kept(schema, [_batch_is(_BELOW), _batch_is(_ABOVE)], flt)) < 2


def batches_kept(schema: pa.Schema, batches: Sequence[int], flt: pc.Expression | None) -> list[int]:
    """The batches of ``batches`` that ``flt`` may keep rows of."""
    if flt is None or not batches:
        return list(batches)
    return [batches[i] for i in _kept(schema, [_batch_is(b) for b in batches], flt)]


def pairs_kept(
    schema: pa.Schema, pairs: Sequence[tuple[int, int]], flt: pc.Expression | None
) -> list[tuple[int, int]]:
    """The ``(partition, batch)`` pairs ``flt`` may keep rows of, in the order given."""
    if flt is None or not pairs:
        return list(pairs)
    import pyarrow.dataset as ds

    guarantees = [(ds.field("partition_id") == p) & _batch_is(b) for p, b in pairs]
    return [pairs[i] for i in _kept(schema, guarantees, flt)]


def first_kept_after(schema: pa.Schema, after: int, flt: pc.Expression) -> int | None:
    """The smallest batch id above ``after`` that ``flt`` keeps, found by halving ranges;
    None when it keeps none (what a query for an uncommitted batch asked for)."""
    import pyarrow.dataset as ds

    field = ds.field("batch_id")
    lo, hi = after + 1, _ABOVE - 1
    if not _kept(schema, [(field >= lo) & (field <= hi)], flt):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if _kept(schema, [(field >= lo) & (field <= mid)], flt):
            hi = mid
        else:
            lo = mid + 1
    return lo


def tables_kept(schema: pa.Schema, count: int, flt: pc.Expression | None) -> list[int]:
    """The numbers among ``range(count)`` of the tables ``flt`` may keep rows of."""
    if flt is None:
        return list(range(count))
    import pyarrow.dataset as ds

    return _kept(schema, [ds.field(TABLE_ID_NAME) == n for n in range(count)], flt)
