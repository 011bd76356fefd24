"""Rows already decoded, as Spark's ``Dataset.toJSON()`` writes them.

:func:`render_row` gives the JSON object text of a row that
:func:`stateglass.parsers.unsaferow.row_decoder` decoded; :func:`to_python` gives the Python
object of that text (``json.loads`` of it, decimals kept exact). Both follow the rules drawn in
:mod:`stateglass.app.render.bytes_to_json`, which starts from the bytes instead and is faster.

Example::

    render = render_row(value_schema, zone="UTC")
    print(render(row_decoder(value_schema)(value_bytes)))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any

from stateglass.app.render.java_text import json_quote
from stateglass.app.render.json_codegen import fstring_literal, runtime
from stateglass.app.render.spark_text import (
    TimeZoneSpec,
    binary_json,
    calendar_interval_json,
    check_supported,
    date_json,
    day_time_interval_json,
    decimal_json,
    double_json,
    float_json,
    json_format,
    key_text,
    timestamp_json,
    timestamp_ntz_json,
    year_month_interval_json,
)
from stateglass.parsers.errors import UnsupportedFormat
from stateglass.parsers.sparktypes import (
    ArrayType,
    DataType,
    MapType,
    StructType,
)
from stateglass.parsers.unsaferow import (
    CalendarInterval,
    Source,
)
from stateglass.parsers.unsafewriter import encode_array, encode_row

__all__ = ["JsonRenderer", "json_text", "render_row", "to_python"]

_INF = float("inf")

JsonRenderer = Callable[[tuple[Any, ...]], str]
"""``render(row_tuple) -> str``: the JSON object text of a decoded row."""


def _value_renderer(dt: DataType, zone: TimeZoneSpec) -> Callable[[Any], str]:
    """JSON text of one decoded (non-null) value of ``dt``."""
    fmt = json_format(dt)
    simple: dict[str, Callable[[Any], str]] = {
        "bool": lambda v: "true" if v else "false",
        "num": str,
        "float": float_json,
        "double": double_json,
        "dec": decimal_json,
        "string": json_quote,
        "binary": binary_json,
        "date": date_json,
        "ntz": timestamp_ntz_json,
        "ym": year_month_interval_json,
        "dti": day_time_interval_json,
        "calendar": lambda v: calendar_interval_json(CalendarInterval(*v)),
        "void": lambda v: "null",
    }
    if fmt in simple:
        return simple[fmt]
    if fmt == "ts":
        return timestamp_json(zone)
    if isinstance(dt, StructType):
        return _struct_renderer(dt, zone)
    if isinstance(dt, ArrayType):
        element = _value_renderer(dt.element_type, zone)
        return lambda v: "[" + ",".join("null" if x is None else element(x) for x in v) + "]"
    if isinstance(dt, MapType):
        key = _tuple_key_text(dt.key_type)
        value = _value_renderer(dt.value_type, zone)
        return lambda v: (
            "{" + ",".join(f"{key(k)}:{'null' if x is None else value(x)}" for k, x in v) + "}"
        )
    raise UnsupportedFormat(f"JSON rendering of {dt!r} values is not supported yet")


def _tuple_key_string(dt: DataType) -> Callable[[Any], str]:
    """Java ``toString`` of a decoded map key (structs and arrays re-encoded to bytes)."""
    fmt = json_format(dt)
    text = key_text(fmt)
    if isinstance(dt, StructType):
        struct_type = dt
        return lambda k: text(encode_row(struct_type, k))
    if isinstance(dt, ArrayType):
        element_type = dt.element_type
        return lambda k: text(encode_array(element_type, k))
    if fmt == "calendar":
        return lambda k: text(CalendarInterval(*k))
    return text


def _tuple_key_text(dt: DataType) -> Callable[[Any], str]:
    """JSON-quoted Java ``toString`` of a decoded map key."""
    string = _tuple_key_string(dt)
    return lambda k: json_quote(string(k))


# Expressions over a decoded value ``{v}`` giving its JSON text, for render_row's code.
_TUPLE_TEXT = {
    "bool": "_TF[{v}]",
    "num": "{v}",
    "dec": "{v}",  # format(Decimal) is str(Decimal): BigDecimal.toString's digits
    "float": "_jf({v})",
    "double": "_jd({v})",
    "string": "_q({v})",
    "binary": "_b64({v})",
    "date": "_date({v})",
    "ts": "_ts({v})",
    "ntz": "_ntz({v})",
    "ym": "_ym({v})",
    "dti": "_dti({v})",
}


def _struct_renderer(st: StructType, zone: TimeZoneSpec) -> Callable[[Any], str]:
    """Generate ``render(row_tuple) -> str`` for one struct type (nested ones recursively)."""
    src = Source(runtime(zone))
    names = [f"v{i}" for i in range(len(st.fields))]
    present: list[tuple[str, str]] = []  # (value variable, f-string piece) of non-void fields
    for var, field in zip(names, st.fields, strict=True):
        fmt = json_format(field.data_type)
        if fmt == "void":
            continue  # always null, so always left out
        template = _TUPLE_TEXT.get(fmt)
        if template is None:
            nested = src.const(_value_renderer(field.data_type, zone), "_r")
            template = nested + "({v})"
        name = fstring_literal(json_quote(field.name))
        present.append((var, f"{name}:{{{template.format(v=var)}}}"))
    src.emit(0, "def render(row):")
    if names:
        src.emit(1, f"{', '.join(names)}, = row")
    if not present:
        src.emit(1, "return '{}'")
    else:
        src.emit(1, f"if {' and '.join(f'{v} is not None' for v, _ in present)}:")
        src.emit(2, f"return f'{{{{{','.join(piece for _, piece in present)}}}}}'")
        src.emit(1, "p = []")
        for var, piece in present:
            src.emit(1, f"if {var} is not None: p.append(f'{piece}')")
        src.emit(1, "return '{' + ','.join(p) + '}'")
    render: Callable[[Any], str] = src.compile("row renderer")["render"]
    return render


@lru_cache(maxsize=256)
def render_row(schema: StructType, zone: str = "UTC") -> JsonRenderer:
    """``render(row) -> str``: the JSON object text Spark writes for a decoded row.

    ``row`` is what :func:`stateglass.parsers.unsaferow.row_decoder` returns for ``schema``. Slower
    than :func:`row_json_encoder` (which starts from bytes), but handy for rows already
    decoded. ``None`` fields (and ``void`` ones) are left out, like Spark does.
    """
    check_supported(schema)
    return _struct_renderer(schema, TimeZoneSpec(zone))


def _python_converter(dt: DataType, zone: TimeZoneSpec) -> Callable[[Any], Any]:
    fmt = json_format(dt)
    if fmt in ("num", "bool", "string", "dec"):
        return lambda v: v
    if fmt == "double":
        return lambda v: v if -_INF < v < _INF else json.loads(double_json(v))
    if fmt == "float":
        # Spark's text of a float (``0.1``) parses to a different double than the float32.
        return lambda v: json.loads(float_json(v))
    if isinstance(dt, StructType):
        return _python_struct(dt, zone)
    if isinstance(dt, ArrayType):
        element = _python_converter(dt.element_type, zone)
        return lambda v: [None if x is None else element(x) for x in v]
    if isinstance(dt, MapType):
        key = _tuple_key_string(dt.key_type)
        value = _python_converter(dt.value_type, zone)
        return lambda pairs: {key(k): None if v is None else value(v) for k, v in pairs}
    text = _value_renderer(dt, zone)
    return lambda v: json.loads(text(v))


def _python_struct(st: StructType, zone: TimeZoneSpec) -> Callable[[Any], dict[str, Any]]:
    seen: dict[str, int] = {}
    keys = []
    for f in st.fields:
        n = seen.get(f.name, 0)
        seen[f.name] = n + 1
        keys.append(f.name if n == 0 else f"{f.name}_{n}")
    converters = [_python_converter(f.data_type, zone) for f in st.fields]
    voids = [json_format(f.data_type) == "void" for f in st.fields]
    items = list(zip(keys, converters, voids, strict=True))

    def convert(row: tuple[Any, ...]) -> dict[str, Any]:
        return {
            key: conv(value)
            for (key, conv, void), value in zip(items, row, strict=True)
            if value is not None and not void
        }

    return convert


@lru_cache(maxsize=256)
def to_python(schema: StructType, zone: str = "UTC") -> Callable[[tuple[Any, ...]], dict[str, Any]]:
    """``convert(row) -> dict``: a decoded row as the Python object of Spark's JSON for it.

    The result equals ``json.loads`` of Spark's text, with two deliberate differences:
    decimals stay exact ``Decimal`` values (``json.loads`` would make them floats), and a
    field name that repeats (allowed in state schemas) gets a suffix ``_1``, ``_2``… for
    its later occurrences instead of overwriting the first. Null fields are left out,
    timestamps and dates are Spark's strings, NaN and infinities the strings Spark writes.
    """
    check_supported(schema)
    return _python_struct(schema, TimeZoneSpec(zone))


def json_text(value: Any) -> str:
    """The JSON text Spark writes for ``value``, one of :func:`to_python`'s objects (or a part
    of one): the way back to Spark's text, which ``json.dumps`` does not give (it quotes a
    decimal, and prints a double as Python does: ``1e-05`` for Spark's ``1.0E-5``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json_quote(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # A float field is already the double of its Float.toString text, which the
        # double's own text repeats.
        return double_json(value)
    if isinstance(value, Decimal):
        return decimal_json(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_quote(k)}:{json_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    return json_quote(str(value))
