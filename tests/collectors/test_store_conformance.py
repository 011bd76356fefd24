"""The built-in readers pass the conformance suite plugin authors run on theirs
(docs/providers.md): HDFS and RocksDB on sample checkpoints, with Spark's rows as the truth.
And the suite fails a reader that breaks the contract: a suite no reader can fail checks
nothing."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.provider_conformance import ProviderConformance, SparkRows, state_lines
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.errors import MissingVersion
from stateglass.collectors.stores.base import Change
from stateglass.collectors.stores.conformance import (
    StoreReaderConformance,
    file_contents,
    store_partitions,
)
from tests.conftest import SAMPLES, copy_checkpoint
from tests.e2e.oracle import spark_rows_of


class BuiltInReader(ProviderConformance):
    """A built-in reader on sample checkpoints, which Spark reads as they are."""

    @pytest.fixture
    def spark_rows(self, spark: Any, checkpoint: str) -> SparkRows:
        return spark_rows_of(spark, checkpoint)


class TestHdfsReader(BuiltInReader):
    @pytest.fixture(params=["spark-4.3/agg-hdfs", "spark-4.3/join-hdfs"])
    def checkpoint(self, request: pytest.FixtureRequest) -> str:
        return str(SAMPLES / request.param)

    @pytest.fixture
    def provider(self) -> str:
        return "hdfs"


class TestRocksDBReader(BuiltInReader):
    # Zips alone, and changelogs with a zip every other version.
    @pytest.fixture(params=["spark-4.3/agg-rocks", "spark-4.3/agg-rocks-cl"])
    def checkpoint(self, request: pytest.FixtureRequest) -> str:
        return str(SAMPLES / request.param)

    @pytest.fixture
    def provider(self) -> str:
        return "rocksdb"


# ---- the suite fails readers that break the contract ---------------------------------------


class Wrapped:
    """A reader answering as the one it wraps, but where a subclass says otherwise."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class DropsAKey(Wrapped):
    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(self.inner.load(version))[1:])


class KeepsDeletedKeys(Wrapped):
    def changes(self, version: int) -> Iterator[Change]:
        return (c for c in self.inner.changes(version) if c[0] != "delete")


class LookupMissesNewKeys(Wrapped):
    def lookup(
        self, keys: Collection[bytes], versions: Sequence[int]
    ) -> Iterator[tuple[int, dict[bytes, bytes]]]:
        first = None
        for version, found in self.inner.lookup(keys, versions):
            first = set(found) if first is None else first
            yield version, {k: v for k, v in found.items() if k in first}


class RaisesForeignErrors(Wrapped):
    def load_keys(self, version: int) -> set[bytes]:
        if version not in self.inner.versions():
            raise KeyError(version)
        return set(self.inner.load_keys(version))


class SaysTooMuch(Wrapped):
    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        if version not in self.inner.versions():
            raise MissingVersion(
                "state/0/0", f"version {version}:\nTraceback (most recent call last)"
            )
        return self.inner.load(version)


class WritesBeside(Wrapped):
    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        with open(os.path.join(self.inner.ctx.store_dir, f"{version}.cache"), "wb") as out:
            out.write(b"cached")
        return self.inner.load(version)


# Each fault, the test of the suite that must catch it, and how that test fails.
FAULTS: dict[type[Wrapped], tuple[str, type[Exception]]] = {
    DropsAKey: ("test_keys_and_counts_are_those_of_the_rows", AssertionError),
    KeepsDeletedKeys: (
        "test_changes_replayed_on_the_version_before_give_the_version",
        AssertionError,
    ),
    LookupMissesNewKeys: ("test_lookup_finds_what_load_holds", AssertionError),
    RaisesForeignErrors: ("test_a_version_never_written_is_missing", KeyError),
    SaysTooMuch: ("test_a_version_never_written_is_missing", AssertionError),
    WritesBeside: ("test_reading_writes_nothing", AssertionError),
}


@pytest.mark.parametrize("fault", [pytest.param(f, id=f.__name__) for f in FAULTS])
def test_the_suite_fails_a_reader_that_breaks_the_contract(
    fault: type[Wrapped], tmp_path: Any
) -> None:
    # A changelog sample: deletes, a changelog per version, zips every other version.
    checkpoint = str(copy_checkpoint(SAMPLES / "spark-4.3" / "session-rocks-cl", tmp_path / "cp"))
    name, failure = FAULTS[fault]
    test: Callable[..., None] = getattr(StoreReaderConformance(), name)
    honest = store_partitions(checkpoint)
    fixtures: dict[str, object] = {
        "parts": honest,
        "pristine": file_contents(checkpoint),
        "store_contents": lambda: file_contents(checkpoint),
    }
    wanted = {n: fixtures[n] for n in inspect.signature(test).parameters}
    test(**wanted)  # the reader as it is passes
    wanted["parts"] = [dataclasses.replace(p, reader=fault(p.reader)) for p in honest]
    with pytest.raises(failure):
        test(**wanted)


def test_the_row_comparison_fails_when_sparks_rows_differ(tmp_path: Path) -> None:
    checkpoint = str(SAMPLES / "spark-4.3" / "agg-hdfs")
    cp = Checkpoint.open(checkpoint)

    def ours(operator_id: int, store_name: str, batch_id: int, drop: int = 0) -> list[str]:
        source = StateSource(cp, StateRequest(operator_id, store_name))
        return state_lines(source, batch_id + 1, tmp_path / "ours.jsonl", "UTC")[drop:]

    test = ProviderConformance().test_every_kept_batch_reads_as_spark_reads_it
    test(checkpoint, ours, "UTC", tmp_path)  # the same rows pass
    with pytest.raises(AssertionError):
        test(checkpoint, functools.partial(ours, drop=1), "UTC", tmp_path)
    with pytest.raises(AssertionError, match="batch 0"):
        test(checkpoint, lambda *_: [], "UTC", tmp_path)
