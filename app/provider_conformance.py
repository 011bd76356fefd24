"""The conformance suite of a state store provider, with Spark's own rows as the truth.

:class:`ProviderConformance` runs every test of
:class:`~stateglass.collectors.stores.conformance.StoreReaderConformance` (the reader
protocol) and one more: at each committed batch whose state is kept, the rows StateGlass
shows for each store (``stateglass state --format jsonl``) are the rows Spark's own state
reader gives for it. It lives in the app layer because those rows are rendered as Spark's
JSON here (:mod:`stateglass.app.render`). A plugin author subclasses it, gives the suite's
fixtures, and adds ``spark_rows``: the JSON rows of Spark's ``statestore`` source, read with
the provider's confs set::

    import pytest

    from stateglass.app.provider_conformance import ProviderConformance, SparkRows

    CHECKPOINT = "tests/data/acme-checkpoint"


    class TestAcmeProvider(ProviderConformance):
        @pytest.fixture
        def checkpoint(self) -> str:
            return CHECKPOINT

        @pytest.fixture
        def provider(self) -> str:
            return "com.acme.AcmeStateStoreProvider"

        @pytest.fixture
        def spark_rows(self, spark) -> SparkRows:
            def rows(operator_id: int, store_name: str, batch_id: int) -> list[str]:
                reader = spark.read.format("statestore").option("operatorId", operator_id)
                reader = reader.option("storeName", store_name).option("batchId", batch_id)
                return reader.load(CHECKPOINT).toJSON().collect()

            return rows

Stores of transformWithState are read one state variable at a time, by options this
comparison does not give Spark: their rows are not compared here.

Only test code imports this module: it needs pytest, which StateGlass itself does not.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.output import open_sink
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.stores.conformance import StoreReaderConformance

# Spark's rows of one store at one batch: ``(operator id, store name, batch id) -> JSON rows``.
SparkRows = Callable[[int, str, int], Sequence[str]]


def canonical(line: str) -> str:
    """A hashable form of one JSON row: pairs in order (state schemas may repeat a field's
    name), numbers as exact decimals (``1.0`` and ``1.00`` are one number)."""

    def norm(v: Any) -> Any:
        if isinstance(v, list):
            if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
                return tuple((k, norm(x)) for k, x in v)
            return ("[", *(norm(x) for x in v))
        if isinstance(v, int | Decimal) and not isinstance(v, bool):
            return ("n", str(Decimal(v).normalize()))
        return v

    def pairs(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        return items

    return repr(norm(json.loads(line, object_pairs_hook=pairs, parse_float=Decimal)))


def multiset(lines: Sequence[str]) -> Counter[str]:
    """Rows as a multiset of :func:`canonical` forms: the order of rows is not kept."""
    return Counter(canonical(line) for line in lines if line.strip())


def state_lines(source: StateSource, version: int, path: Path, time_zone: str) -> list[str]:
    """The JSON rows ``stateglass state`` writes for ``source`` at ``version``."""
    with open_sink("jsonl", str(path), source.row_codec, time_zone) as sink:
        for partition in source.partitions_for(version - 1):
            with source.decoding(partition):
                sink.write_state_partition(source, partition, version)
    return path.read_text(encoding="utf-8").splitlines()


class ProviderConformance(StoreReaderConformance):
    """The reader protocol, and Spark's rows at every kept batch. Override the fixtures
    ``checkpoint``, ``provider`` and ``spark_rows``; ``time_zone`` is Spark's session time
    zone (``spark.sql.session.timeZone``), UTC unless overridden."""

    @pytest.fixture
    def spark_rows(self) -> SparkRows:
        """Spark's rows of a store at a batch: see :data:`SparkRows`."""
        raise NotImplementedError("override the fixture 'spark_rows' in your subclass")

    @pytest.fixture
    def time_zone(self) -> str:
        return "UTC"

    def test_every_kept_batch_reads_as_spark_reads_it(
        self, checkpoint: str, spark_rows: SparkRows, time_zone: str, tmp_path: Path
    ) -> None:
        cp = Checkpoint.open(checkpoint)
        committed = set(cp.commit_batch_ids)
        compared = 0
        for store in cp.stores():
            if store.is_transform_with_state:
                continue
            source = StateSource(cp, StateRequest(store.operator_id, store.store_name))
            for version in source.readable_versions():
                if version - 1 not in committed:
                    continue
                ours = state_lines(source, version, tmp_path / "rows.jsonl", time_zone)
                spark = spark_rows(store.operator_id, store.store_name, version - 1)
                where = f"{cp.root}: operator {store.operator_id} store {store.store_name}"
                assert multiset(ours) == multiset(spark), f"{where}, batch {version - 1}"
                compared += len(spark)
        assert compared, "Spark read no row: an empty match proves nothing"
