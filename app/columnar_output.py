"""A partition of a plain key/value store as an Arrow table, decoded a column at a time.

The glue between a store's :class:`RowCodec` and :mod:`parsers.columnar`: the stored items'
key and value UnsafeRows go into two binary arrays and come out as the ``key`` and
``value`` struct columns that Spark's reader returns, plus ``partition_id``.

Example::

    if columnar_supported(codec):
        table = columnar_partition(codec, partition, items)  # None: decode row by row
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from stateglass.parsers.columnar import decode_struct, supported
from stateglass.parsers.state_rows import RowCodec


def columnar_supported(codec: RowCodec) -> bool:
    """Whether :func:`columnar_partition` can read this store's rows."""
    return (
        codec.raw_capable
        and not codec.grouped
        and [name for name, _ in codec.columns] == ["key", "value"]
        and supported(codec.key_schema)
        and supported(codec.value_schema)
    )


def payload_arrays(
    codec: RowCodec, items: Sequence[tuple[bytes, bytes]]
) -> tuple[pa.Array, pa.Array] | None:
    """The key and value UnsafeRows of the items that give rows, as two binary arrays."""
    if codec.spec.provider == "hdfs":
        keys = [k for k, _ in items]
        values = [v for _, v in items]
    else:
        payloads = codec.payloads
        keys, values = [], []
        for k, v in items:
            pair = payloads(k, v)
            if pair is None:
                continue  # another column family's key
            if pair[1] is None:
                return None
            keys.append(pair[0])
            values.append(pair[1])
    return pa.array(keys, type=pa.large_binary()), pa.array(values, type=pa.large_binary())


def columnar_partition(
    codec: RowCodec, partition: int, items: Sequence[tuple[bytes, bytes]]
) -> pa.Table | None:
    """``key``, ``value`` and ``partition_id`` of every row of one partition.

    None when some row needs the Python decoder (:func:`stateglass.parsers.columnar.decode_struct`).
    """
    try:
        arrays = payload_arrays(codec, items)
        if arrays is None:
            return None
        key = decode_struct(codec.key_schema, arrays[0])
        value = decode_struct(codec.value_schema, arrays[1])
    except pa.ArrowException:
        # Past what one Arrow array holds (2 GiB of strings, 32-bit list offsets): the row
        # path builds the same table in chunks.
        return None
    if key is None or value is None:
        return None
    pid = pa.array(np.full(len(key), partition, dtype=np.int32), type=pa.int32())
    return pa.table([key, value, pid], names=["key", "value", "partition_id"])
