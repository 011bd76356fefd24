"""Spark's own State Data Source as the oracle, and helpers to compare its rows with ours.

Rows are compared as multisets of parsed JSON, keeping field order and duplicate field names
(state value schemas may repeat names), with numbers parsed exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import reduce
from typing import Any

from stateglass.app.cli import main as cli_main
from stateglass.app.provider_conformance import SparkRows, multiset
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from tests.conftest import SAMPLES as SAMPLE_DIR

SAMPLES = str(SAMPLE_DIR)


def format_samples() -> list[str]:
    """The version-tagged samples (``spark-4.3/``, ``spark-3.5/``) the Spark-oracle sweeps
    cover. The demo stories (``demo/``) are the same formats at more cost: they have their own
    test (tests/e2e/test_demo.py), and the suite stays lean."""
    from stateglass.app.discovery import find_checkpoints

    demo = os.path.join(SAMPLES, "demo") + os.sep
    return [p for p in find_checkpoints(SAMPLES) if not p.startswith(demo)]


def leaf_columns(table: Any) -> list[Any]:
    """The leaf columns of an Arrow table, structs flattened by position: rows compare by the
    position of their values, since Spark repeats aggregation buffer names that Arrow
    tables written by StateGlass suffix."""
    import pyarrow as pa

    leaves: list[pa.ChunkedArray] = []
    todo = list(table.columns)
    while todo:
        column = todo.pop(0)
        if pa.types.is_struct(column.type):
            todo[:0] = column.flatten()
        else:
            leaves.append(column)
    return leaves


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


def spark_states(
    spark: Any, checkpoint: str, operator: int, store: str, batches: list[int]
) -> dict[int, list[str]]:
    """Spark's rows at each of ``batches``, in one job: the reads at every batch, unioned."""
    from pyspark.sql import functions as F

    frames = []
    for batch in batches:
        df = _reader(spark, {"operatorId": operator, "storeName": store, "batchId": batch})
        df = df.load(checkpoint)
        frames.append(df.select(F.lit(batch).alias("b"), F.to_json(F.struct(*df.columns))))
    out: dict[int, list[str]] = {b: [] for b in batches}
    for batch, row in reduce(lambda x, y: x.unionAll(y), frames).collect():
        out[batch].append(row)
    return out


def spark_rows_of(
    spark: Any,
    checkpoint: str,
    confs: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> SparkRows:
    """Spark's rows of each store of ``checkpoint``, every readable batch read in one job the
    first time the store is asked for; ``confs`` sets the session's confs for the reads."""
    cp = Checkpoint.open(checkpoint)
    read: dict[tuple[int, str], dict[int, list[str]]] = {}

    def rows(operator_id: int, store_name: str, batch_id: int) -> list[str]:
        if (operator_id, store_name) not in read:
            source = StateSource(cp, StateRequest(operator_id, store_name))
            kept = [v - 1 for v in source.readable_versions() if v - 1 in cp.commit_batch_ids]
            with confs():
                read[operator_id, store_name] = spark_states(
                    spark, checkpoint, operator_id, store_name, kept
                )
        return read[operator_id, store_name][batch_id]

    return rows


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
