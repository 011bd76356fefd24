"""`stateglass state` / `changes` against Spark's own State Data Source, row for row.

For every sample checkpoint, operator and store, three batch ids: the last committed one, one
whose version is read straight from a snapshot (``.snapshot`` / ``.zip``) and one rebuilt through
deltas or changelogs. A transformWithState store is read per state variable (``stateVarName``)
and for its timers (``readRegisteredTimers``); list and map variables also unflattened
(``flattenCollectionTypes=false``, last batch only).

Which operators and stores exist is Spark's answer, not ours: ``state-metadata`` lists them,
every store it lists must have its cases here (and no case may name a store it does not),
and a case where Spark returns no rows fails rather than matching our empty answer.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from stateglass.app.discovery import find_checkpoints
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from tests.e2e.oracle import (
    SAMPLES,
    assert_same_rows,
    format_samples,
    layout_stores,
    operator_metadata,
    ours,
    spark_changes,
    spark_state,
    spark_stores,
    state_reads,
)

pytestmark = pytest.mark.spark


def _version_kinds(cp: Checkpoint, operator: int, store: str) -> tuple[set[int], set[int]]:
    """Versions of partition 0 that have a snapshot/zip, and those with a delta/changelog."""
    snaps: set[int] = set()
    deltas: set[int] = set()
    for f in cp.list_dir(cp.store_dir(operator, 0, store)):
        stem, _, ext = f.name.rpartition(".")
        head = stem.split("_", 1)[0]
        if not head.isdigit():
            continue
        if ext in ("snapshot", "zip"):
            snaps.add(int(head))
        elif ext in ("delta", "changelog"):
            deltas.add(int(head))
    return snaps, deltas


def _cases() -> list[Any]:
    cases = []
    for path in format_samples():
        cp = Checkpoint.open(path)
        committed = set(cp.commit_batch_ids)
        name = os.path.relpath(path, SAMPLES)
        if not committed:
            continue
        for store in cp.stores():
            snaps, deltas = _version_kinds(cp, store.operator_id, store.store_name)
            last = max(committed)
            picks = {"last": last}
            via_snapshot = sorted(v - 1 for v in snaps if v - 1 in committed and v - 1 != last)
            via_delta = sorted(
                v - 1 for v in deltas - snaps if v - 1 in committed and v - 1 != last
            )
            if via_snapshot:
                picks["snapshot"] = via_snapshot[-1]
            if via_delta:
                picks["delta"] = via_delta[-1]
            for label, options, args in state_reads(store):
                for kind, batch in picks.items():
                    if label.endswith("-noflat") and kind != "last":
                        continue
                    var = f"-{label}" if label else ""
                    cases.append(
                        pytest.param(
                            path,
                            store.operator_id,
                            store.store_name,
                            batch,
                            options,
                            args,
                            id=f"{name}-op{store.operator_id}-{store.store_name}{var}-{kind}-b{batch}",
                        )
                    )
    return cases


def _change_cases() -> list[Any]:
    cases = []
    for path in format_samples():
        cp = Checkpoint.open(path)
        name = os.path.relpath(path, SAMPLES)
        for store in cp.stores():
            _, deltas = _version_kinds(cp, store.operator_id, store.store_name)
            committed = [b for b in cp.commit_batch_ids if b + 1 in deltas]
            if len(committed) < 2:
                continue  # RocksDB without changelogs: Spark has no change feed for it
            start, end = committed[len(committed) // 2], committed[-1]
            # Spark's change feed cannot cross a repartition (it writes no changelog): start
            # after the last one (tests/collectors/test_repartition_spark.py reads both sides).
            start = max([start, *(r.batch_id + 1 for r in cp.repartitions)])
            for label, options, args in state_reads(store):
                if label == "timers" or label.endswith("-noflat"):
                    continue  # Spark has no change feed for these (it fails)
                var = f"-{label}" if label else ""
                cases.append(
                    pytest.param(
                        path,
                        store.operator_id,
                        store.store_name,
                        start,
                        end,
                        options,
                        args,
                        id=f"{name}-op{store.operator_id}-{store.store_name}{var}-b{start}-{end}",
                    )
                )
    return cases


CASES = _cases()


@pytest.mark.parametrize(("path", "operator", "store", "batch", "options", "args"), CASES)
def test_state_matches_spark(
    spark: Any,
    tmp_path: Any,
    path: str,
    operator: int,
    store: str,
    batch: int,
    options: dict[str, Any],
    args: list[str],
) -> None:
    expected = spark_state(spark, path, operator, store, batch, options)
    got = ours(
        [
            "state",
            path,
            "--operator",
            str(operator),
            "--store",
            store,
            "--batch-id",
            str(batch),
            *args,
        ],
        tmp_path,
    )
    assert_same_rows(got, expected)


@pytest.mark.parametrize(
    ("path", "operator", "store", "start", "end", "options", "args"), _change_cases()
)
def test_changes_match_spark(
    spark: Any,
    tmp_path: Any,
    path: str,
    operator: int,
    store: str,
    start: int,
    end: int,
    options: dict[str, Any],
    args: list[str],
) -> None:
    expected = spark_changes(spark, path, operator, store, start, end, options)
    got = ours(
        [
            "changes",
            path,
            "--operator",
            str(operator),
            "--store",
            store,
            "--from",
            str(start),
            "--to",
            str(end),
            *args,
        ],
        tmp_path,
    )
    assert_same_rows(got, expected)


@pytest.mark.parametrize("path", format_samples(), ids=lambda p: os.path.relpath(p, SAMPLES))
def test_every_store_spark_lists_is_compared(spark: Any, path: str) -> None:
    listed = spark_stores(spark, path)
    if not listed:
        # Spark 3.5 wrote no operator metadata, so state-metadata has nothing to list: that
        # must be the reason, and the directory layout (not our reader) names the stores.
        assert operator_metadata(path) == [], "state-metadata ignored this checkpoint's metadata"
        listed = layout_stores(path)
    assert listed
    compared = {(c.values[1], c.values[2]) for c in CASES if c.values[0] == path}
    assert compared == listed


def test_there_are_samples() -> None:
    assert len(find_checkpoints(SAMPLES)) >= 7
