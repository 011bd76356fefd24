"""Values decoded by :mod:`stateglass.parsers.unsaferow` as what Arrow takes for their type.

Types without an Arrow counterpart (calendar intervals, variants) become Spark's JSON text of
the value, which is why this lives with the renderers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from stateglass.app.render.rows_to_json import to_python
from stateglass.parsers.arrow_types import has_text_form, unique_names
from stateglass.parsers.sparktypes import (
    ArrayType,
    DataType,
    MapType,
    StructField,
    StructType,
)


def arrow_value(dt: DataType, time_zone: str = "UTC") -> Callable[[Any], Any]:
    """Turn a value decoded by :mod:`stateglass.parsers.unsaferow` into what Arrow takes for
    ``dt``."""
    if isinstance(dt, StructType):
        names = unique_names(dt.names)
        convs = [arrow_value(f.data_type, time_zone) for f in dt.fields]
        items = list(zip(names, convs, strict=True))
        return lambda row: (
            None
            if row is None
            else {n: None if v is None else c(v) for (n, c), v in zip(items, row, strict=True)}
        )
    if isinstance(dt, ArrayType):
        elem = arrow_value(dt.element_type, time_zone)
        return lambda xs: None if xs is None else [None if x is None else elem(x) for x in xs]
    if isinstance(dt, MapType):
        key, value = arrow_value(dt.key_type, time_zone), arrow_value(dt.value_type, time_zone)
        return lambda pairs: (
            None if pairs is None else [(key(k), None if v is None else value(v)) for k, v in pairs]
        )
    if has_text_form(dt):
        # Written as text: Spark's JSON rendering of the value.
        py = to_python(StructType((StructField("v", dt),)), time_zone)
        return lambda v: None if v is None else json.dumps(py((v,)).get("v"), default=str)
    return lambda v: v
