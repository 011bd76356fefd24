"""Tests for parsers.repartition: repartition batches found in real offset logs Spark wrote."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from stateglass.parsers.logs import OffsetSeq
from stateglass.parsers.repartition import (
    Repartition,
    find_repartitions,
    is_repartition,
    partitions_at,
)
from tests.conftest import SAMPLES

# Spark 4.2 repartitioned these after batches 0..2 (sample_checkpoints/make_repartitioned.py).
GOLDEN = {
    "repart-agg-up-cl": Repartition(3, 3, 5),
    "repart-agg-down": Repartition(3, 4, 2),
    "repart-dedup-down-cl": Repartition(3, 5, 3),
}


def _offsets(checkpoint: Path) -> dict[int, OffsetSeq]:
    folder = checkpoint / "offsets"
    return {
        int(f.name): OffsetSeq.from_bytes(f.read_bytes())
        for f in folder.iterdir()
        if f.name.isdigit()
    }


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_finds_the_repartition_spark_wrote(name: str) -> None:
    entries = _offsets(SAMPLES / "spark-4.2" / name)
    assert find_repartitions(entries) == [GOLDEN[name]]


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_partitions_at_each_batch(name: str) -> None:
    move = GOLDEN[name]
    entries = _offsets(SAMPLES / "spark-4.2" / name)
    newest = entries[max(entries)].shuffle_partitions
    for batch, entry in entries.items():
        assert partitions_at(batch, [move], newest) == entry.shuffle_partitions


def test_a_normal_sample_has_none() -> None:
    assert find_repartitions(_offsets(SAMPLES / "spark-4.3" / "agg-rocks-cl")) == []


def test_new_input_is_not_a_repartition() -> None:
    """A batch that read new offsets is a batch, whatever its conf says."""
    entries = _offsets(SAMPLES / "spark-4.2" / "repart-agg-up-cl")
    before, after = entries[2], entries[4]  # different source offsets
    moved = replace(after, conf={**after.conf, "spark.sql.shuffle.partitions": "7"})
    assert not is_repartition(before, moved)
    assert is_repartition(entries[2], entries[3])


def test_a_purged_predecessor_cannot_be_judged() -> None:
    entries = _offsets(SAMPLES / "spark-4.2" / "repart-agg-up-cl")
    del entries[2]
    assert find_repartitions(entries) == []
