"""Rendering cost per row of the ``bench_state_read.py --schema`` shapes, compiled and Python.

Usage::

    .venv/bin/python benchmarks/bench_render_schemas.py [--rows 200000] [--runs 3]

No Spark and no I/O: rows of each schema are built once with the test encoder (values like
those of the benchmark's checkpoints: millisecond timestamps, doubles with long digits), then
``state_blob_encoder`` (the path of ``stateglass state --format jsonl``, compiled when
``parsers._speedups`` is built) and the generated Python of ``state_lines_encoder`` joined
into the same bytes are timed in the same process, alternating, best of ``--runs``. Both
must give the same bytes. The ratio is what the compiled loop buys on a loaded machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stateglass.app.render.bytes_to_json import state_blob_encoder, state_lines_encoder
from stateglass.parsers.sparktypes import AtomicType, DataType, StructField, StructType
from stateglass.parsers.unsafewriter import encode_row

T0 = 1_700_000_000_000_000


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType(tuple(StructField(n, t) for n, t in fields))


STRING, LONG, TS = AtomicType("string"), AtomicType("long"), AtomicType("timestamp")
DOUBLE, BOOL = AtomicType("double"), AtomicType("boolean")
WINDOW = _struct(("start", TS), ("end", TS))
Row = Callable[[int], tuple[Any, ...]]
SCHEMAS: dict[str, tuple[StructType, StructType, Row, Row]] = {
    "counter": (
        _struct(("k", STRING)),
        _struct(("n", LONG), ("total", LONG)),
        lambda i: (f"key-{i:08d}",),
        lambda i: (i % 5 + 1, i % 97),
    ),
    "maxts": (
        _struct(("k", STRING)),
        _struct(("n", LONG), ("last", TS)),
        lambda i: (f"key-{i:08d}",),
        lambda i: (1, T0 + (i * 7919 % 2_592_000_000) * 1000),
    ),
    "window": (
        _struct(("window", WINDOW), ("k", STRING)),
        _struct(("n", LONG), ("sum", DOUBLE), ("count", LONG)),
        lambda i: ((T0 + i // 50 * 3_600_000_000, T0 + (i // 50 + 1) * 3_600_000_000), f"k{i}"),
        lambda i: (1, i * 0.37 + i % 7 / 3.0, 1),
    ),
    "dedup": (
        _struct(("k", STRING), ("ts", TS)),
        _struct(("__dummy__", AtomicType("void"))),
        lambda i: (f"key-{i:08d}", T0 + (i * 7919 % 2_592_000_000) * 1000),
        lambda i: (None,),
    ),
    "join-keyWithIndexToValue": (
        _struct(("key", _struct(("k", STRING))), ("index", LONG)),
        _struct(("k", STRING), ("v", LONG), ("ts", TS), ("x", DOUBLE), ("matched", BOOL)),
        lambda i: ((f"key-{i:08d}",), 0),
        lambda i: (f"key-{i:08d}", i % 97, T0 + i * 1000, i * 0.37 + i % 7 / 3.0, True),
    ),
}


def best(fn: Callable[[], bytes], runs: int) -> tuple[float, bytes]:
    times, out = [], b""
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    distinct = min(args.rows, 20_000)  # building rows is slow; repeat a distinct block
    print(
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {platform.machine()}, "
        f"{os.cpu_count()} cores, python {platform.python_version()}, {args.rows} rows, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print("| schema | compiled µs/row | Python µs/row | ratio | same bytes |")
    print("|---|---|---|---|---|")
    for name, (key, value, krow, vrow) in SCHEMAS.items():
        block = [(encode_row(key, krow(i)), encode_row(value, vrow(i))) for i in range(distinct)]
        pairs = (block * (args.rows // distinct + 1))[: args.rows]
        blob, lines = state_blob_encoder(key, value), state_lines_encoder(key, value)

        def compiled(blob: Any = blob, pairs: list[Any] = pairs) -> bytes:
            out: bytes = blob(iter(pairs), 0)[0]
            return out

        def python(lines: Any = lines, pairs: list[Any] = pairs) -> bytes:
            texts = lines(pairs, 0)
            texts.append("")
            return "\n".join(texts).encode("utf-8")

        tc, oc = best(compiled, args.runs)
        tp, op = best(python, args.runs)
        per = 1e6 / args.rows
        print(
            f"| {name} | {tc * per:.3f} | {tp * per:.3f} | {tp / tc:.1f}× | "
            f"{'yes' if oc == op else 'NO'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
