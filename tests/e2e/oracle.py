"""Spark's own State Data Source as the oracle, and helpers to compare its rows with ours.

Rows are compared as multisets of parsed JSON, keeping field order and duplicate field names
(state value schemas may repeat names), with numbers parsed exactly.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from decimal import Decimal
from typing import Any

from stateglass.app.cli import main as cli_main
from tests.conftest import SAMPLES as SAMPLE_DIR

SAMPLES = str(SAMPLE_DIR)


def format_samples() -> list[str]:
    """The version-tagged samples (``spark-4.3/``, ``spark-3.5/``) the Spark-oracle sweeps
    cover. The demo stories (``demo/``) are the same formats at more cost: they have their own
    test (tests/e2e/test_demo.py), and the suite stays lean."""
    from stateglass.app.discovery import find_checkpoints

    demo = os.path.join(SAMPLES, "demo") + os.sep
    return [p for p in find_checkpoints(SAMPLES) if not p.startswith(demo)]


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


def assert_same_rows(got: list[str], expected: list[str]) -> None:
    """Our rows are Spark's, as multisets; two empty answers prove nothing and fail."""
    assert expected, "Spark returned no rows: an empty-versus-empty match is not a check"
    assert len(got) == len(expected)
    assert multiset(got) == multiset(expected)


def _reader(spark: Any, options: dict[str, Any]) -> Any:
    reader = spark.read.format("statestore")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader


def spark_stores(spark: Any, checkpoint: str) -> set[tuple[int, str]]:
    """``(operator id, store name)`` of every state store Spark's own ``state-metadata``
    source lists for ``checkpoint``: what the oracle must cover, not what our reader found."""
    df = spark.read.format("state-metadata").load(checkpoint)
    return {(int(r["operatorId"]), str(r["stateStoreName"])) for r in df.collect()}


VERSION_FILES = (".delta", ".snapshot", ".zip", ".changelog")


def layout_stores(checkpoint: str) -> set[tuple[int, str]]:
    """``(operator id, store name)`` from the directory layout alone (``state/<op>/0/`` holds
    the default store's version files, or one folder per named store), for checkpoints whose
    writer (Spark before 4.0) left no operator metadata for ``state-metadata`` to list."""
    found: set[tuple[int, str]] = set()
    state = os.path.join(checkpoint, "state")
    for op in filter(str.isdigit, os.listdir(state)):
        part = os.path.join(state, op, "0")
        entries = os.listdir(part)
        if any(e.endswith(VERSION_FILES) and not e.startswith(".") for e in entries):
            found.add((int(op), "default"))
            continue
        found |= {
            (int(op), e)
            for e in entries
            if os.path.isdir(os.path.join(part, e)) and not e.startswith(("_", "."))
        }
    return found


def operator_metadata(checkpoint: str) -> list[str]:
    """The operator metadata files Spark 4 writes (``state/<op>/_metadata/...``)."""
    state = os.path.join(checkpoint, "state")
    return [
        os.path.join(root, f)
        for op in os.listdir(state)
        for root, _, files in os.walk(os.path.join(state, op, "_metadata"))
        for f in files
        if not f.startswith(".")
    ]


def spark_state(
    spark: Any,
    checkpoint: str,
    operator: int,
    store: str,
    batch: int,
    options: dict[str, Any] | None = None,
) -> list[str]:
    """Spark's rows; ``options`` adds reader options (``stateVarName``, …)."""
    opts = {"operatorId": operator, "storeName": store, "batchId": batch, **(options or {})}
    df = _reader(spark, opts).load(checkpoint)
    return list(df.toJSON().collect())


def spark_changes(
    spark: Any,
    checkpoint: str,
    operator: int,
    store: str,
    start: int,
    end: int,
    options: dict[str, Any] | None = None,
) -> list[str]:
    opts = {
        "operatorId": operator,
        "storeName": store,
        "readChangeFeed": "true",
        "changeStartBatchId": start,
        "changeEndBatchId": end,
        **(options or {}),
    }
    df = _reader(spark, opts).load(checkpoint)
    return list(df.toJSON().collect())


def state_reads(store: Any) -> list[tuple[str, dict[str, Any], list[str]]]:
    """How to read one store: ``(label, Spark options, stateglass arguments)`` per read.

    A transformWithState store is read once per state variable (and once for its timers);
    list and map variables also unflattened. Any other store is read once, as it is.
    """
    if not (store.is_transform_with_state and store.state_variables):
        return [("", {}, [])]
    reads: list[tuple[str, dict[str, Any], list[str]]] = []
    for var in store.state_variables:
        if var.kind == "TimerState":
            reads.append(("timers", {"readRegisteredTimers": "true"}, ["--read-timers"]))
            continue
        reads.append((var.name, {"stateVarName": var.name}, ["--state-var", var.name]))
        if var.kind in ("ListState", "MapState"):
            reads.append(
                (
                    f"{var.name}-noflat",
                    {"stateVarName": var.name, "flattenCollectionTypes": "false"},
                    ["--state-var", var.name, "--no-flatten"],
                )
            )
    return reads


def ours(args: list[str], tmp_path: Any) -> list[str]:
    out = os.path.join(str(tmp_path), f"out-{abs(hash(tuple(args)))}.jsonl")
    code = cli_main([*args, "--format", "jsonl", "-o", out])
    assert code == 0, f"stateglass {' '.join(args)} exited {code}"
    with open(out, encoding="utf-8") as fh:
        return fh.read().splitlines()
