"""Spark's own State Data Source as the oracle, and helpers to compare its rows with ours.

Rows are compared as multisets of parsed JSON, keeping field order and duplicate field names
(state value schemas may repeat names), with numbers parsed exactly.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from decimal import Decimal
from typing import Any

from app.cli import main as cli_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "sample_checkpoints")


def canonical(line: str) -> str:
    """A hashable form of one JSON row: pairs in order, numbers as exact decimals."""

    def norm(v: Any) -> Any:
        if isinstance(v, list):
            if all(isinstance(x, tuple) and len(x) == 2 for x in v) and v:
                return tuple((k, norm(x)) for k, x in v)
            return ("[", *(norm(x) for x in v))
        if isinstance(v, (int, Decimal)) and not isinstance(v, bool):
            return ("n", str(Decimal(v).normalize()))
        return v

    def pairs(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        return items

    parsed = json.loads(line, object_pairs_hook=pairs, parse_float=Decimal)
    return repr(norm(parsed))


def multiset(lines: list[str]) -> Counter[str]:
    return Counter(canonical(line) for line in lines if line.strip())


def spark_state(spark: Any, checkpoint: str, operator: int, store: str, batch: int) -> list[str]:
    df = (
        spark.read.format("statestore")
        .option("operatorId", operator)
        .option("storeName", store)
        .option("batchId", batch)
        .load(checkpoint)
    )
    return list(df.toJSON().collect())


def spark_changes(
    spark: Any, checkpoint: str, operator: int, store: str, start: int, end: int
) -> list[str]:
    df = (
        spark.read.format("statestore")
        .option("operatorId", operator)
        .option("storeName", store)
        .option("readChangeFeed", "true")
        .option("changeStartBatchId", start)
        .option("changeEndBatchId", end)
        .load(checkpoint)
    )
    return list(df.toJSON().collect())


def ours(args: list[str], tmp_path: Any) -> list[str]:
    out = os.path.join(str(tmp_path), f"out-{abs(hash(tuple(args)))}.jsonl")
    code = cli_main([*args, "--format", "jsonl", "-o", out])
    assert code == 0, f"stateglass {' '.join(args)} exited {code}"
    with io.open(out, encoding="utf-8") as fh:
        return fh.read().splitlines()
