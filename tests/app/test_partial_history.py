"""Partial history: partitions whose collected history starts at different versions.

The checkpoint is written by a real PySpark query (RocksDB, changelog checkpointing off, so
every version of every partition is a full ``N.zip``; 3 shuffle partitions, 8 batches). Spark
itself purges nothing here (``minBatchesToRetain`` is above the batch count): the test copies
the checkpoint and deletes ``1.zip``..``4.zip`` of partitions 0 and 1 only, which is what
RocksDB's maintenance (``deleteOldVersions``) does to a partition once those versions fall
out of its retention, and what a long-running job looks like when partitions are purged at
different times. Only then is it collected, so partition 2 reaches back to version 1 while
the others start at version 5. No total over partitions may be given for versions 1..4, and
``stateglass info``, the State page and the report must all give versions 5..8.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app import cli, figures, queries
from stateglass.app.dashboard.context import DB_ENV
from stateglass.app.escape import md
from stateglass.app.report.html import render as render_html
from stateglass.app.report.markdown import render as render_markdown
from stateglass.app.report.model import load_report
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import spark_conf, write_batch_files
from tests.progress_queries import ROCKSDB

# One real query (8 batches) for the module; the Spark session may start here.
pytestmark = [pytest.mark.spark, pytest.mark.slow]

BATCHES = 8
PURGED_BELOW = 5  # partitions 0 and 1 keep versions 5.. only
TIMEOUT_S = 60


def _run_query(spark: Any, base: Path) -> Path:
    # More keys each batch, spread over the 3 partitions by their hash.
    src = write_batch_files(
        base / "src",
        [[{"k": f"key-{i}", "n": n} for i in range(10 * (n + 1))] for n in range(BATCHES)],
    )
    settings = {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
        "spark.sql.streaming.minBatchesToRetain": "100",
        "spark.sql.shuffle.partitions": "3",
    }
    with spark_conf(spark, settings):
        query = (
            spark.readStream.schema("k STRING, n INT")
            .option("maxFilesPerTrigger", 1)
            .json(str(src))
            .groupBy("k")
            .count()
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(base / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return base / "cp"


@pytest.fixture(scope="module")
def purged(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(checkpoint, database): the copy with partitions 0 and 1 purged below version 5."""
    base = tmp_path_factory.mktemp("partial")
    written = _run_query(spark, base)
    copy = base / "copy"
    shutil.copytree(written, copy)
    store = copy / "state" / "0"
    for partition in (0, 1):
        for version in range(1, PURGED_BELOW):
            (store / str(partition) / f"{version}.zip").unlink()
    assert (store / "2" / "1.zip").exists()
    db = str(base / "partial.duckdb")
    scan_checkpoint(Database(db), str(copy))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DB_ENV, db)
        yield str(copy), db


def test_no_total_where_a_partition_is_missing(purged: tuple[str, str]) -> None:
    cp, db = purged
    cells = queries.partition_cells(db, cp, 0, "default")
    # The collected history really is partial: partition 2 from 1, the others from 5.
    firsts = cells.groupby("partition_id")["version"].min().to_dict()
    assert firsts == {0: PURGED_BELOW, 1: PURGED_BELOW, 2: 1}

    growth = queries.state_growth(db, cp, 0, "default").set_index("version")
    assert growth.loc[1 : PURGED_BELOW - 1, "num_keys"].isna().all()
    assert growth.loc[PURGED_BELOW:, "num_keys"].notna().all()
    # The first complete version has no growth: nothing to compare it with.
    assert math.isnan(growth.loc[PURGED_BELOW, "keys_growth"])
    skew = queries.partition_skew(db, cp, 0, "default").set_index("version")
    assert skew.loc[1 : PURGED_BELOW - 1, "skew"].isna().all()
    assert skew.loc[PURGED_BELOW:, "skew"].notna().all()

    sizes = queries.size_history(db).set_index("version")
    assert sizes.loc[1 : PURGED_BELOW - 1, "num_keys"].isna().all()
    assert sizes.loc[PURGED_BELOW:, "num_keys"].notna().all()
    # 10 keys per batch, all present at version 8: 80 keys, with no earlier "drop".
    assert int(sizes.loc[BATCHES, "num_keys"]) == 10 * BATCHES

    fig = figures.keys_over_versions(cells, partitions=3)
    total = next(t for t in fig.data if t.name == "total")
    # Drawn over batch ids; each point's state version is on its hover.
    by_version = dict(zip(total.customdata, total.y, strict=True))
    assert all(math.isnan(by_version[v]) for v in range(1, PURGED_BELOW))
    assert by_version[BATCHES] == 10 * BATCHES


def test_history_note_says_where_and_why(purged: tuple[str, str]) -> None:
    cp, db = purged
    history = queries.store_history(db, cp, 0, "default")
    assert (history["first_complete"], history["last_complete"]) == (PURGED_BELOW, BATCHES)
    note = queries.history_note(history)
    assert note.startswith(
        f"history from version {PURGED_BELOW}: earlier versions were purged by Spark before "
        "the first collect"
    )
    assert "partition 2 from 1" in note


def test_info_state_page_and_report_agree_on_the_range(purged: tuple[str, str]) -> None:
    cp, db = purged
    span = f"{PURGED_BELOW}..{BATCHES}"

    out = StringIO()
    with redirect_stdout(out):
        assert cli.main(["info", cp]) == 0
    versions = [line for line in out.getvalue().splitlines() if "versions" in line]
    assert versions and all(f"versions   {span}" in line for line in versions), out.getvalue()

    at = AppTest.from_function(_state_page, default_timeout=TIMEOUT_S)
    at.run()
    at.sidebar.selectbox(key="sg_checkpoint_widget").select(cp).run()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["versions"] == span
    assert any("history from version 5" in str(c.value) for c in at.caption)

    data = load_report(db, cp)
    page = render_html(data)
    assert f"<th>versions</th><td>{span}</td>" in page
    assert f"history from version {PURGED_BELOW}" in page
    report = render_markdown(data)
    assert f"| {md(span)} |" in report and md("1..8") not in report
    assert f"history from version {PURGED_BELOW}" in report


def _state_page() -> None:
    from stateglass.app.dashboard.views import state

    state.render()


def test_health_rules_judge_complete_versions_only(purged: tuple[str, str]) -> None:
    from stateglass.app.analysis.health import evaluate

    cp, db = purged
    findings = {f.rule: f for f in evaluate(db, cp)}
    # unbounded_state reads state_growth: only versions 5..8 have a total (4 of the 8), too
    # few to judge, where the partial totals of 1..4 would have shown a jump as growth.
    assert "4 versions, too few to judge" in findings["unbounded_state"].finding
    assert findings["partition_skew"].status == "OK"
