"""Rows per second of the UnsafeRow decoder and the Spark-JSON encoder (no I/O, no Spark).

Usage::

    .venv/bin/python benchmarks/bench_unsaferow.py [--rows 200000] [--runs 5]

Two schemas:

* ``agg``: key ``struct<k:string>``, value ``struct<count:bigint,sum:bigint>`` — a plain
  streaming aggregation, the common case;
* ``rich``: the ``flatMapGroupsWithState`` state of the corpus (strings, array, map,
  nested struct, decimal(38,18), timestamp, date, binary, double, float…).

For each it times, per row: ``row_decoder`` on key and value; ``state_line_encoder``
(bytes → JSON line) and its batch form ``state_lines_encoder``; ``state_blob_encoder``
(bytes → UTF-8 lines, the path ``stateglass state --format jsonl`` uses: compiled for
``agg`` when ``stateglass.parsers._speedups`` is built, generated Python for ``rich``); and
``row_decoder`` + ``render_row`` (tuples → JSON). Then the record stream of a delta file
holding the ``agg`` rows: ``read_records`` and ``read_record_keys``. Prints a Markdown table
(best of ``--runs``) for docs/benchmarks.md; run it again with ``STATEGLASS_PURE=1`` for the
pure-Python figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import struct
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stateglass.app.render.bytes_to_json import (
    state_blob_encoder,
    state_line_encoder,
    state_lines_encoder,
)
from stateglass.app.render.rows_to_json import render_row
from stateglass.parsers import hdfs_files as records
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DecimalType,
    MapType,
    StructField,
    StructType,
)
from stateglass.parsers.unsaferow import row_decoder
from stateglass.parsers.unsafewriter import encode_row

Pair = tuple[bytes, bytes]


def _struct(*fields: tuple[str, Any]) -> StructType:
    return StructType(tuple(StructField(name, dt) for name, dt in fields))


AGG_KEY = _struct(("k", AtomicType("string")))
AGG_VALUE = _struct(("count", AtomicType("long")), ("sum", AtomicType("long")))

RICH_KEY = _struct(("value", AtomicType("string")))
RICH_STATE = _struct(
    ("cnt", AtomicType("long")),
    ("names", ArrayType(AtomicType("string"))),
    ("m", MapType(AtomicType("string"), AtomicType("integer"))),
    ("inner", _struct(("a", AtomicType("integer")), ("b", AtomicType("string")))),
    ("dec", DecimalType(38, 18)),
    ("ts", AtomicType("timestamp")),
    ("dt", AtomicType("date")),
    ("bin", AtomicType("binary")),
    ("dbl", AtomicType("double")),
    ("flag", AtomicType("boolean")),
    ("opt", AtomicType("string")),
    ("i", AtomicType("integer")),
    ("sh", AtomicType("short")),
    ("by", AtomicType("byte")),
    ("f", AtomicType("float")),
)
RICH_VALUE = _struct(("groupState", RICH_STATE), ("timeoutTimestamp", AtomicType("long")))


def agg_rows(n: int) -> list[Pair]:
    """Rows as Spark writes them for ``groupBy(k).agg(count, sum)`` (built with struct)."""
    rows = []
    for i in range(n):
        key = f"key-{i}".encode()
        padded = key + b"\0" * (-len(key) % 8)
        rows.append(
            (
                struct.pack("<QII", 0, len(key), 16) + padded,
                struct.pack("<Qqq", 0, i % 97 + 1, i * 31),
            )
        )
    return rows


def rich_rows(n: int) -> list[Pair]:
    """Distinct rich rows, built with the test encoder (slow, so built once and repeated)."""
    distinct = []
    for i in range(min(n, 2000)):
        state = (
            i,
            [f"n{i}", f"m{i}"],
            [(f"x{j}", j * i) for j in range(3)],
            (i, "inner"),
            Decimal(f"{i}.{i:018d}"[:39]).quantize(Decimal("1E-18")),
            1_700_000_000_000_000 + i * 1_000_123,
            19_000 + i % 400,
            bytes([i % 256, 0, 255]),
            i / 7,
            i % 2 == 0,
            None if i % 3 else "seen",
            -i,
            i % 30000,
            i % 100,
            i / 4,
        )
        distinct.append(
            (
                encode_row(RICH_KEY, (f"key-{i}",)),
                encode_row(RICH_VALUE, (state, 1_000 * i)),
            )
        )
    return [distinct[i % len(distinct)] for i in range(n)]


def best_of(runs: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(
    name: str, key_schema: StructType, value_schema: StructType, rows: list[Pair], runs: int
) -> list[str]:
    key = row_decoder(key_schema)
    value = row_decoder(value_schema)
    line = state_line_encoder(key_schema, value_schema)
    lines = state_lines_encoder(key_schema, value_schema)
    blob = state_blob_encoder(key_schema, value_schema)
    render_key = render_row(key_schema)
    render_value = render_row(value_schema)
    n = len(rows)

    def decode() -> None:
        for k, v in rows:
            key(k)
            value(v)

    def encode() -> None:
        for k, v in rows:
            line(k, v, 0)

    def encode_batch() -> None:
        lines(rows, 0)

    def encode_blob() -> None:
        blob(rows, 0)

    def decode_render() -> None:
        for k, v in rows:
            f'{{"key":{render_key(key(k))},"value":{render_value(value(v))},"partition_id":0}}'

    def loop_only() -> None:
        for _k, _v in rows:
            pass

    base = best_of(runs, loop_only)
    out = []
    for label, fn in (
        ("decode key+value (row_decoder)", decode),
        ("bytes → JSON line (state_line_encoder)", encode),
        ("bytes → JSON lines (state_lines_encoder)", encode_batch),
        ("bytes → UTF-8 lines (state_blob_encoder)", encode_blob),
        ("decode + render_row", decode_render),
    ):
        t = best_of(runs, fn) - base
        out.append(f"| {name} | {label} | {t / n * 1e6:.2f} | {n / t / 1e6:.2f} |")
    return out


def measure_records(rows: list[Pair], runs: int) -> list[str]:
    """Splitting a decompressed delta file of ``rows`` into records, and into keys only."""
    stream = b"".join(
        struct.pack(">i", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in rows
    ) + struct.pack(">i", -1)
    n = len(rows)
    out = []
    for label, fn in (
        ("delta file → records (read_records)", lambda: records.read_records(stream)),
        ("delta file → keys (read_record_keys)", lambda: records.read_record_keys(stream)),
    ):
        t = best_of(runs, fn)
        out.append(f"| agg | {label} | {t / n * 1e6:.2f} | {n / t / 1e6:.2f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    compiled = "compiled speedups" if records._speedups is not None else "pure Python"
    print(
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs;"
        f" {args.rows} rows, best of {args.runs}; {compiled}"
    )
    print()
    print("| schema | step | µs/row | M rows/s |")
    print("|---|---|---|---|")
    agg = agg_rows(args.rows)
    for line in measure("agg", AGG_KEY, AGG_VALUE, agg, args.runs):
        print(line)
    for line in measure_records(agg, args.runs):
        print(line)
    for line in measure("rich", RICH_KEY, RICH_VALUE, rich_rows(args.rows), args.runs):
        print(line)


if __name__ == "__main__":
    main()
