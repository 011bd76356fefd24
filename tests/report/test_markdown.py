"""The Markdown summary: verdicts, key numbers and operators, checked against the database."""

from __future__ import annotations

import os
import re
from datetime import datetime

import pandas as pd
import pytest

from stateglass.app.analysis.health import evaluate, worst
from stateglass.app.report import render_html, render_markdown
from stateglass.app.report.markdown import cell, render
from stateglass.app.report.model import ReportData
from stateglass.collectors.db.read import read_query
from tests.conftest import SAMPLES
from tests.report.conftest import report_now

CASES = ["spark-4.3/join-hdfs", "spark-4.3/agg-rocks-cl", "spark-3.5/agg-hdfs"]


def _cells(line: str) -> int:
    """Cells of a Markdown table row (escaped pipes are not separators)."""
    return len(re.split(r"(?<!\\)\|", line.strip())) - 2


@pytest.mark.parametrize("name", CASES)
def test_summary_matches_the_database(report_db: str, name: str) -> None:
    checkpoint = str(SAMPLES / name)
    now = report_now(report_db, checkpoint)
    text = render_markdown(report_db, checkpoint, now=now)
    findings = evaluate(report_db, checkpoint, now=now)

    assert text.startswith(f"# StateGlass report: {os.path.basename(name)} — {worst(findings)}")
    assert findings, "the health rules ran"
    for f in findings:
        assert f"| {cell(f.finding)} |" in text
        if f.status != "OK" and f.hint:
            assert cell(f.hint) in text

    (last_batch,) = read_query(
        report_db,
        "SELECT max(batch_id) FROM batches WHERE checkpoint = ? AND committed",
        [checkpoint],
    )[0]
    assert f"| last committed batch | {last_batch:,} |" in text
    (keys,) = read_query(
        report_db,
        "SELECT sum(num_keys) FROM state_versions s WHERE checkpoint = ? AND version = ("
        " SELECT max(version) FROM state_versions t WHERE t.checkpoint = s.checkpoint"
        " AND t.operator_id = s.operator_id AND t.store_name = s.store_name"
        " AND t.partition_id = s.partition_id)",
        [checkpoint],
    )[0]
    assert f"| keys (newest version, all stores) | {keys:,} |" in text

    stores = read_query(
        report_db,
        "SELECT operator_id, operator_name, store_name, num_partitions FROM operators "
        "WHERE checkpoint = ?",
        [checkpoint],
    )
    for op, op_name, store, partitions in stores:
        assert re.search(
            rf"^\| {op} \| {re.escape(cell(op_name))} \| {re.escape(cell(store))} \| \w+ \| "
            rf"{partitions} \|",
            text,
            re.M,
        ), store

    # Every table row has as many cells as its header.
    width = None
    for line in text.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        width = width or _cells(line)
        assert _cells(line) == width, line


def test_times_read_as_times_in_the_source(report_db: str) -> None:
    checkpoint = str(SAMPLES / "spark-4.3/tws-rocks-cl")
    text = render_markdown(report_db, checkpoint, now=report_now(report_db, checkpoint))
    assert re.search(r"\| \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", text), "a time in a cell"
    assert not re.search(r"\d\\:\d", text), "no escaped colon in a time"


def test_each_state_variable_has_its_columns_as_info_lists_them(report_db: str) -> None:
    from stateglass.app.commands.info import store_summary
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    checkpoint = str(SAMPLES / "spark-4.3/tws-rocks-cl")
    cp = Checkpoint.open(checkpoint)
    [store] = cp.stores()
    variables = store_summary(cp, store)["state_variables"]
    text = render_markdown(report_db, checkpoint, now=report_now(report_db, checkpoint))
    schemas = text[text.index("Schemas:") :].split("\n\n")[1].splitlines()
    assert len(schemas) == len(variables) == 4
    for line, var in zip(schemas, variables, strict=True):
        columns = ", ".join(f"{name} `{type_}`" for name, type_ in var["columns"].items())
        assert line.endswith(f": {columns}"), line
    page = render_html(report_db, checkpoint, now=report_now(report_db, checkpoint))
    assert "default</code> · by_kind (MapState)" in page
    assert "user_map_key struct&lt;kind:string&gt;" in page


def test_cells_keep_pipes_and_newlines_inside() -> None:
    assert cell("struct<a|b>\nx") == "struct\\<a\\|b> x"
    assert cell(None) == ""


def test_a_checkpoint_without_findings_or_stores_says_so_in_each_section() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5)
    data = ReportData(
        db_path="db",
        checkpoint="/data/<b>cp",
        query_id="q",
        generated_at=at,
        as_of=at,
        last_scan=None,
        findings=(),
        overview={},
        batches=pd.DataFrame(),
        inputs=pd.DataFrame(),
        stores=(),
        problems=pd.DataFrame(),
        numbers=(("last committed batch", "7"),),
    )
    lines = render(data).splitlines()
    assert lines[0] == "# StateGlass report: \\<b>cp — OK"
    sections = [line for line in lines if line.startswith("## ")]
    assert sections == ["## Health: OK (no checks ran)", "## Key numbers", "## Operators"]
    after = {line: lines[i + 2] for i, line in enumerate(lines) if line in sections}
    assert after["## Health: OK (no checks ran)"] == "No health findings."
    assert after["## Operators"] == "No stateful operator."
    assert "| last committed batch | 7 |" in lines
