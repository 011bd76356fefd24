"""Growth attribution against Spark's own reader.

Spark reads the store at the window's two ends (``spark.read.format("statestore")``); the new
keys are the left-anti join of newest against base on (partition_id, key), and each key leaf's
values are counted from Spark's ``to_json`` of the key. Every (field, value) count must be
ours, and so must the keys added at each version of the window.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest

from stateglass.app.browse.growth import GrowthAttribution, attribute_growth, window_versions
from stateglass.collectors.checkpoints.state_views import StateView
from tests.collectors.helpers import SAMPLES

pytestmark = pytest.mark.spark

CASES = [
    pytest.param("spark-4.3/agg-hdfs", 4, id="agg-hdfs"),
    pytest.param("spark-4.3/dedup-hdfs", 3, id="dedup-hdfs"),
    pytest.param("spark-4.3/agg-rocks-cl", 3, id="agg-rocks-cl"),
]
EVERYTHING = 10_000  # top-k large enough to compare every (field, value)


def _text(value: Any) -> str:
    """A JSON value as the attribution prints it: strings quoted, null, numbers bare."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _leaves(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _leaves(f"{prefix}.{k}" if prefix else k, v, out)
    else:
        out[prefix] = _text(value)


def _spark_new_keys(spark: Any, path: str, base: int, newest: int) -> list[dict[str, str]]:
    """Leaf values of every key at ``newest`` and not at ``base`` (versions), per Spark."""
    from pyspark.sql import functions as F

    def read(version: int) -> Any:
        return (
            spark.read.format("statestore")
            .option("batchId", version - 1)
            .load(path)
            .select("partition_id", "key")
        )

    after = read(newest)
    new = after if base == 0 else after.join(read(base), ["partition_id", "key"], "left_anti")
    out = []
    for row in new.select(F.to_json("key").alias("k")).collect():
        # to_json writes every field, null ones too only when asked: fill them from the schema.
        leaves: dict[str, str] = {}
        _leaves("", json.loads(row["k"], parse_float=Decimal), leaves)
        out.append(leaves)
    return out


def _all_leaves(spark: Any, path: str, version: int) -> list[str]:
    schema = spark.read.format("statestore").option("batchId", version - 1).load(path).schema
    names: list[str] = []

    def walk(prefix: str, dt: Any) -> None:
        if hasattr(dt, "fields"):
            for f in dt.fields:
                walk(f"{prefix}.{f.name}" if prefix else f.name, f.dataType)
        else:
            names.append(prefix)

    walk("", schema["key"].dataType)
    return names


def _counts(keys: list[dict[str, str]], fields: list[str]) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for leaves in keys:
        for f in fields:
            counts[(f, leaves.get(f, "null"))] += 1  # to_json leaves null fields out
    return counts


# About ten Spark reads and joins per case.
@pytest.mark.slow
@pytest.mark.parametrize(("name", "window"), CASES)
def test_growth_attribution_matches_spark(spark: Any, name: str, window: int) -> None:
    check_against_spark(spark, str(SAMPLES / name), window)


@pytest.fixture(scope="module")
def leak(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.forensics import growth_query

    return str(growth_query.run(spark, tmp_path_factory.mktemp("growth")))


@pytest.mark.slow
def test_null_customers_bring_the_new_keys(spark: Any, leak: str) -> None:
    result = check_against_spark(spark, leak, 3)
    lead = result.contributors[0]
    # Batches 3..5 add 8 + 10 + 12 anonymous devices and 2 of customer c9: 30 of 32.
    assert (lead.field, lead.value, lead.keys, result.new_keys) == ("customer_id", "null", 30, 32)
    assert result.sentence() == (
        "customer_id = null accounts for 94% of the 32 keys added since version 3"
    )
    # Known customers are updated, never new; the chart counts nulls per version.
    assert lead.added == (8, 10, 12)


def check_against_spark(spark: Any, path: str, window: int) -> GrowthAttribution:
    """Ours equals Spark's reader for every (field, value) and every version of the window."""
    result = attribute_growth(StateView(path), window=window, top=EVERYTHING)
    assert result.newest - result.base == window
    fields = _all_leaves(spark, path, result.newest)
    assert list(result.fields) == fields
    theirs = _spark_new_keys(spark, path, result.base, result.newest)
    assert result.new_keys == len(theirs) > 0
    ours = Counter({(c.field, c.value): c.keys for c in result.contributors})
    assert ours == _counts(theirs, fields)
    shares = Counter()
    for c in result.contributors:
        shares[c.field] += c.share
    assert all(abs(s - 1.0) < 1e-9 for s in shares.values())
    # The chart: keys added at each version, in all and per (field, value).
    previous = result.base
    for i, version in enumerate(result.steps):
        added = _spark_new_keys(spark, path, previous, version)
        assert result.added[i] == len(added), f"version {version}"
        per_value = _counts(added, fields)
        for c in result.contributors:
            assert c.added[i] == per_value.get((c.field, c.value), 0), (version, c.label)
        previous = version
    return result


def test_top_k_is_the_largest_and_the_sentence_names_it() -> None:
    path = str(SAMPLES / "spark-4.3/dedup-hdfs")
    full = attribute_growth(StateView(path), window=3, top=EVERYTHING)
    top = attribute_growth(StateView(path), window=3, top=2)
    assert [(c.field, c.value, c.keys) for c in top.contributors] == [
        (c.field, c.value, c.keys) for c in full.contributors[:2]
    ]
    assert top.contributors[0].keys >= top.contributors[1].keys
    lead = top.contributors[0]
    assert top.sentence().startswith(f"{lead.field} = {lead.value} accounts for")
    assert f"since version {top.base}" in top.sentence()


def test_window_versions() -> None:
    assert window_versions([1, 2, 3, 4, 5], 10) == (0, [1, 2, 3, 4, 5])
    assert window_versions([1, 2, 3, 4, 5], 2) == (3, [4, 5])
    # Purged history: the base rises to the oldest version every partition can rebuild.
    assert window_versions([7, 8, 9], 5) == (7, [8, 9])


def test_share_of_all_keys_from_a_sample_of_a_big_store() -> None:
    """Past ``share_sample`` keys, the share of all keys now comes from every n-th key of
    each partition, says so, and stays near the exact share; new-key counts stay exact."""
    path = str(SAMPLES / "demo/unbounded-state")
    exact = attribute_growth(StateView(path), window=5, top=EVERYTHING)
    sampled = attribute_growth(StateView(path), window=5, top=EVERYTHING, share_sample=300)
    assert exact.share_sample == 0 and exact.share_note() == ""
    assert 0 < sampled.share_sample < 600
    assert "estimated from" in sampled.share_note()
    assert [(c.field, c.value, c.keys, c.added) for c in sampled.contributors] == [
        (c.field, c.value, c.keys, c.added) for c in exact.contributors
    ]
    for s, e in zip(sampled.contributors, exact.contributors, strict=True):
        assert abs(s.share_of_all - e.share_of_all) < 0.1, s.label
