"""Arrow rows (a SQL result) as the values :mod:`stateglass.parsers.unsaferow` decodes, so that
the renderers of decoded rows (Spark's JSON, the text table) print them: the way back of
:mod:`stateglass.app.render.arrow_values`.

Example::

    columns = [(f.name, spark_type(f.type)) for f in batch.schema]
    render = render_row(StructType(...columns...), "UTC")
    lines = [render(row) for row in decoded_rows(batch)]
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from typing import Any

from stateglass.parsers.arrow_types import spark_type
from stateglass.parsers.sparktypes import AtomicType

_STRING = AtomicType("string")
_EPOCH_DAY = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MICRO = datetime.timedelta(microseconds=1)


def decoded_value(at: Any) -> Callable[[Any], Any]:
    """Turn a non-null Python value of Arrow type ``at`` (``to_pylist``) into what
    :mod:`stateglass.parsers.unsaferow` decodes for its Spark type
    (:func:`stateglass.parsers.arrow_types.spark_type`): the inverse of :func:`arrow_value`,
    so that the renderers of decoded rows (Spark's JSON, the text table) take Arrow rows."""
    import pyarrow as pa

    t = pa.types
    if t.is_struct(at):
        convs = [decoded_value(at.field(i).type) for i in range(at.num_fields)]
        return lambda d: tuple(
            None if v is None else c(v) for c, v in zip(convs, d.values(), strict=True)
        )
    if t.is_map(at):
        key, item = decoded_value(at.key_type), decoded_value(at.item_type)
        return lambda pairs: [(key(k), None if v is None else item(v)) for k, v in pairs]
    if t.is_list(at) or t.is_large_list(at) or t.is_fixed_size_list(at) or t.is_list_view(at):
        elem = decoded_value(at.value_type)
        return lambda xs: [None if x is None else elem(x) for x in xs]
    if t.is_dictionary(at):
        return decoded_value(at.value_type)
    if t.is_timestamp(at):
        epoch = _EPOCH if at.tz is None else _EPOCH_UTC
        return lambda ts: (ts - epoch) // _MICRO
    if t.is_date(at):
        return lambda d: (d - _EPOCH_DAY).days
    if t.is_duration(at):
        return lambda td: td // _MICRO
    if t.is_interval(at):
        return lambda iv: (iv.months, iv.days, iv.nanoseconds // 1000)
    if spark_type(at) == _STRING and not (
        t.is_string(at) or t.is_large_string(at) or t.is_string_view(at)
    ):
        return str  # a type Spark has no JSON for (a time of day, a UUID): its text
    return lambda v: v


def decoded_rows(batch: Any) -> Iterator[tuple[Any, ...]]:
    """The rows of an Arrow record batch as :func:`decoded_value` gives each column's values."""
    columns = []
    for column in batch.columns:
        convert = decoded_value(column.type)
        columns.append([None if v is None else convert(v) for v in column.to_pylist()])
    return zip(*columns, strict=True)
