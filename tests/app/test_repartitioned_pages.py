"""Browse, Key history, growth attribution and Diff on checkpoints Spark 4.2 repartitioned.

The oracle is ``stateglass state`` at each batch, which equals Spark's reader row for row on
these checkpoints (tests/collectors/test_repartition_spark.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.browse.diff import compute_diff
from stateglass.app.browse.growth import attribute_growth
from stateglass.app.browse.key_history import find_key_json, key_history
from stateglass.app.browse.store import PartitionCache
from stateglass.app.browse.table import PageRequest, read_page
from stateglass.app.cli import main as cli
from stateglass.app.errors import AppError
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_views import StateView, open_source, versions
from tests.conftest import SAMPLES

GOLDEN = ["repart-agg-down", "repart-agg-up-cl", "repart-dedup-down-cl"]


def _rows(path: Path, batch: int, tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / f"state-{path.name}-{batch}.jsonl"
    assert cli(["state", str(path), "--batch-id", str(batch), "-o", str(out)]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("name", GOLDEN)
def test_every_version_is_listed_and_browsed_with_its_own_partitions(
    name: str, tmp_path: Path
) -> None:
    path = SAMPLES / "spark-4.2" / name
    view = StateView(str(path))
    cp = Checkpoint.open(str(path))
    assert versions(view) == [b + 1 for b in cp.commit_batch_ids]
    for batch in cp.commit_batch_ids:
        page = read_page(PageRequest(view, version=batch + 1, page_size=1000), cache=None)
        expected = _rows(path, batch, tmp_path)
        assert page.total == len(expected)
        assert {r["partition_id"] for r in expected} <= set(cp.partitions_at(0, batch))


def test_key_history_follows_the_key_into_its_new_partition(tmp_path: Path) -> None:
    path = SAMPLES / "spark-4.2" / "repart-agg-down"
    view = StateView(str(path))
    found = versions(view)
    cp = Checkpoint.open(str(path))
    (move,) = cp.repartitions
    per_batch = {b: _rows(path, b, tmp_path) for b in cp.commit_batch_ids}
    # A key held on both sides, in another partition after the repartition.
    before = {json.dumps(r["key"]): r["partition_id"] for r in per_batch[move.batch_id - 1]}
    after = {json.dumps(r["key"]): r["partition_id"] for r in per_batch[move.batch_id + 1]}
    moved = sorted(k for k in before if k in after and before[k] != after[k])
    assert moved, "some key changes partition when 4 partitions become 2"
    ref = find_key_json(view, found, moved[0], cache=PartitionCache(1 << 20))
    assert ref is not None
    table = key_history(view, ref, found)
    columns = table.column("version").to_pylist(), table.column("partition_id").to_pylist()
    partitions = dict(zip(*columns, strict=True))
    statuses = table.column("status").to_pylist()
    for version in found:
        rows = [r for r in per_batch[version - 1] if json.dumps(r["key"]) == moved[0]]
        if rows:
            assert partitions[version] == rows[0]["partition_id"], version
    assert partitions[move.version - 1] == before[moved[0]]
    assert partitions[move.version + 1] == after[moved[0]]
    # Present on both sides: never "removed" or "added" because it moved.
    assert "removed" not in statuses[statuses.index("present") :]


def test_growth_across_the_repartition_counts_new_keys_only(tmp_path: Path) -> None:
    path = SAMPLES / "spark-4.2" / "repart-agg-up-cl"
    view = StateView(str(path))
    result = attribute_growth(view, window=5)
    assert result.base < result.newest - 2  # the window spans the repartition (batch 3)
    keys = {
        b: {json.dumps(r["key"]) for r in _rows(path, b, tmp_path)}
        for b in (result.base - 1, result.newest - 1)
    }
    assert result.new_keys == len(keys[result.newest - 1] - keys[result.base - 1])


def test_diff_across_the_repartition_says_why_not() -> None:
    view = StateView(str(SAMPLES / "spark-4.2" / "repart-agg-down"))
    with pytest.raises(AppError, match="both sides of a repartition"):
        compute_diff(view, 2, 6)
    assert open_source(view).partitions == [0, 1]
