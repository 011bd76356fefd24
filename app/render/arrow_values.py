"""Values decoded by :mod:`stateglass.parsers.unsaferow` as what Arrow takes for their type,
with Spark's JSON text for the types Arrow has no counterpart for (calendar intervals,
variants): the renderers live here, the mapping in :mod:`stateglass.parsers.state_arrow`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stateglass.app.render.rows_to_json import json_text, to_python
from stateglass.parsers.sparktypes import DataType, StructField, StructType
from stateglass.parsers.state_arrow import TextForm
from stateglass.parsers.state_arrow import arrow_value as _arrow_value


def spark_text(time_zone: str = "UTC") -> TextForm:
    """A value of a type without an Arrow counterpart as Spark's JSON text of it."""

    def form(dt: DataType) -> Callable[[Any], Any]:
        py = to_python(StructType((StructField("v", dt),)), time_zone)
        return lambda v: None if v is None else json_text(py((v,)).get("v"))

    return form


def arrow_value(dt: DataType, time_zone: str = "UTC") -> Callable[[Any], Any]:
    """Turn a value decoded by :mod:`stateglass.parsers.unsaferow` into what Arrow takes for
    ``dt``."""
    return _arrow_value(dt, spark_text(time_zone))
