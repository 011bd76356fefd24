"""Spark's hash partitioning, computed from a key's JSON, against where Spark put each key.

Every key of every sample store at its last version (both providers, Spark 3.5 and 4.3):
the partition ``parsers.partitioning.key_partition`` computes from the key's JSON text must
be the partition directory holding it, whenever it computes one; stores keyed by what the
shuffle hashes (aggregations, deduplication, transformWithState) must all be covered.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from stateglass.app.browse.key_history import find_key_json
from stateglass.app.browse.store import PartitionCache, iter_partitions, key_json_renderer
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_views import (
    StateView,
    identity_width,
    open_source,
    versions,
    views_of,
)
from stateglass.parsers.partitioning import key_partition, row_partition
from tests.conftest import SAMPLES, sample_checkpoints

# Stores whose key is exactly what the shuffle hashes (strings, timestamps, a window struct;
# a join's keyWithIndexToValue adds an index to it, a session window's key is hashed
# without its session: the lookup falls back to every partition for those).
SHUFFLE_KEYED = ("agg-", "dedup-", "tws-", "window-", "fmgws-")


def _views() -> list[object]:
    out = []
    for cp in sample_checkpoints():
        for store in Checkpoint.open(cp).stores():
            for view in views_of(store, cp):
                name = f"{Path(cp).parent.name}/{Path(cp).name}/{view.label}"
                out.append(pytest.param(view, id=name))
    return out


@pytest.mark.parametrize("view", _views())
def test_computed_partition_is_where_spark_put_the_key(view: StateView) -> None:
    keyed = view.keyed(open_source(view).row_codec)
    source = open_source(keyed)
    codec = source.row_codec
    render = key_json_renderer(codec)
    last = versions(keyed)[-1]
    n = source.store.num_partitions
    computed = wrong = 0
    for data in iter_partitions(keyed, last, source.partitions, cache=PartitionCache()):
        for item in range(data.num_items):
            (row,) = codec.rows(data.keys[item].as_py(), data.values[item].as_py())[:1]
            text = json.loads(render(row), parse_float=Decimal, parse_int=Decimal)
            key = text if identity_width(codec) == 1 else text["key"]
            home = key_partition(codec.columns[0][1], key, n)
            if home is not None:
                computed += 1
                wrong += home != data.partition
                # The decoded row hashes as its JSON does (the repartition planner's path).
                assert row_partition(codec.columns[0][1], row[0], n) == home
    name = Path(view.checkpoint).name
    if name.startswith(SHUFFLE_KEYED) or view.store_name.endswith("-keyToNumValues"):
        assert computed, "every key type here is covered: none was computed"
        assert wrong == 0, f"{wrong} of {computed} keys computed to another partition"


def test_pasted_key_found_in_its_partition_only() -> None:
    """A pasted key is looked up in its home partition: no other partition is read."""
    view = StateView(str(SAMPLES / "spark-4.3" / "agg-hdfs"))
    source = open_source(view)
    found = versions(view)
    cache = PartitionCache()
    data = next(iter_partitions(view, found[-1], [source.partitions[-1]], cache=cache))
    render = key_json_renderer(source.row_codec)
    label = render(source.row_codec.rows(data.keys[0].as_py(), data.values[0].as_py())[0])
    cache = PartitionCache()
    ref = find_key_json(view, found, label, cache=cache, jobs=1)
    assert ref is not None and ref.partition == data.partition
    assert {p for (_, _, p) in cache._items} == {data.partition}
