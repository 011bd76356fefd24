"""``stateglass compat`` against real restarts of transformWithState with Avro encoding, where
Spark lets a value schema evolve under Avro's reader rules.

OLD keeps ``n BIGINT`` in a ValueState (RocksDB, ``encodingFormat=avro``, two batches). One
changed processor adds a field (Avro reads the old rows: Spark restarts), another turns ``n``
into a string (Avro cannot: ``STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION``).
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.analysis.compat.rules import INVALID_VALUE_EVOLUTION
from stateglass.app.cli import main
from tests.compat.spark_runs import ROCKSDB, Confs, error_class, write_json

pytestmark = pytest.mark.slow

CONFS = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    "spark.sql.streaming.stateStore.encodingFormat": "avro",
}
# Value schema of the ValueState, and the row the processor stores for a count.
STATES = {
    "old": ("n BIGINT", lambda n: (n,)),
    "field-added": ("n BIGINT, label STRING", lambda n: (n, f"seen {n}")),
    "type-changed": ("n STRING", lambda n: (str(n),)),
}
CASES = {"field-added": None, "type-changed": INVALID_VALUE_EVOLUTION}


def _processor(state: str) -> Any:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    schema, row = STATES[state]

    class Counter(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.count = handle.getValueState("count", schema)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            import pandas as pd

            seen = sum(len(pdf) for pdf in rows)
            # The stored value is read only where its first field is still a count.
            if self.count.exists() and state != "type-changed":
                seen += int(self.count.get()[0])
            self.count.update(row(seen))
            yield pd.DataFrame({"k": [key[0]], "n": [seen]})

        def close(self) -> None:
            pass

    return Counter()


def _run(spark: Any, state: str, source: Path, cp: Path, **opts: str) -> None:
    reader = spark.readStream.schema("k INT, v BIGINT, s STRING")
    for key, value in opts.items():
        reader = reader.option(key, value)
    with warnings.catch_warnings():
        # PySpark 4.3 warns about pandas 3 on every pandas UDF; the pinned pandas is 3.x.
        warnings.filterwarnings(
            "ignore", "PySpark does not yet fully support pandas", FutureWarning
        )
        df = (
            reader.json(str(source))
            .groupBy("k")
            .transformWithStateInPandas(_processor(state), "k INT, n BIGINT", "Update", "None")
        )
    q = (
        df.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()


@pytest.fixture(scope="module")
def tws_outcomes(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[Path, Path, str | None]]]:
    from pyspark.errors import StreamingQueryException

    root = tmp_path_factory.mktemp("compat-tws")
    source = root / "in"
    source.mkdir()
    write_json(source / "1.json", [(1, 10, "a"), (2, 20, "b")])
    write_json(source / "2.json", [(1, 11, "c")])
    old = root / "old"
    with Confs(spark, CONFS):
        _run(spark, "old", source, old, maxFilesPerTrigger="1")
        write_json(source / "3.json", [(2, 21, "d")])
        out = {}
        for case in CASES:
            new = root / f"new-{case}"
            _run(spark, case, source, new)
            restarted = root / f"restart-{case}"
            shutil.copytree(old, restarted)
            spark_error = None
            try:
                _run(spark, case, source, restarted)
            except StreamingQueryException as exc:
                spark_error = error_class(exc)
            out[case] = (old, new, spark_error)
    yield out


@pytest.mark.parametrize("case", list(CASES))
def test_compat_follows_avro_evolution(
    case: str,
    tws_outcomes: dict[str, tuple[Path, Path, str | None]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    old, new, spark_error = tws_outcomes[case]
    assert spark_error == CASES[case]
    status = main(["compat", str(old), str(new), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == (0 if spark_error is None else 1), report
    assert report["error_class"] == spark_error
    if spark_error is None:
        evolved = [c for c in report["checks"] if "evolves (Avro)" in c["message"]]
        assert evolved, report
