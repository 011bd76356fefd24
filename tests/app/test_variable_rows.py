"""transformWithState counts that mean rows: per state variable, as ``stateglass state
--state-var`` returns them, with the timers apart, in ``info``, ``/metrics``, the State page,
the Overview and the reports; the store's raw RocksDB key count stays, labelled as such."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app.cli import main as cli_main
from stateglass.app.dashboard.context import DB_ENV
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.app.test_metrics_cmd import scrape, start, stop
from tests.conftest import SAMPLES

TWS = str(SAMPLES / "spark-4.3" / "tws-rocks-cl")
STORE = "0 transformWithStateInPandasExec / default"
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def tws_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Database(str(tmp_path_factory.mktemp("tws") / "history.duckdb"))
    scan_checkpoint(db, TWS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DB_ENV, db.path)
        yield db.path


def _lines(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert cli_main(list(args)) == 0
    return capsys.readouterr().out.splitlines()


@pytest.fixture(scope="module")
def spark_rows() -> dict[str, int]:
    """Rows ``stateglass state`` returns per state variable, and ``--read-timers``."""
    out: dict[str, int] = {}
    for name, option in (
        ("stats", ["--state-var", "stats"]),
        ("by_kind", ["--state-var", "by_kind"]),
        ("recent", ["--state-var", "recent"]),
        ("$eventTimers_keyToTimestamp", ["--read-timers"]),
    ):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert cli_main(["state", TWS, *option, "--jobs", "1"]) == 0
        out[name] = len(buffer.getvalue().splitlines())
    return out


def test_the_raw_key_count_is_no_variable_s_rows(tws_db: str, spark_rows: dict[str, int]) -> None:
    """What made a page say "keys now 89": every column family's keys together."""
    ((raw,),) = read_query(
        tws_db,
        "SELECT sum(num_keys) FROM partition_newest WHERE checkpoint = ?",
        [TWS],
    )
    assert raw > sum(spark_rows.values())
    # A ListState read flattened gives one row per element, more than its keys.
    assert spark_rows["recent"] > spark_rows["stats"]


def test_collected_rows_equal_spark_s_reader(tws_db: str, spark_rows: dict[str, int]) -> None:
    found = read_query(
        tws_db,
        "SELECT column_family, role, sum(row_count), sum(raw_keys) FROM variable_rows "
        "WHERE version = (SELECT max(version) FROM variable_rows) GROUP BY ALL",
    )
    rows = {name: n for name, role, n, _ in found if role in ("state variable", "timers")}
    assert rows == spark_rows
    # The timer index and the list's row counter are kept as raw keys, never as rows.
    internal = {name: (n, keys) for name, role, n, keys in found if role == "internal"}
    assert internal["$eventTimers_timestampToKey"][0] is None
    assert internal["$eventTimers_timestampToKey"][1] == spark_rows["$eventTimers_keyToTimestamp"]


def test_info_gives_rows_per_state_variable(
    capsys: pytest.CaptureFixture[str], spark_rows: dict[str, int]
) -> None:
    (store,) = json.loads("\n".join(_lines(capsys, "info", TWS, "--json")))["stores"]
    assert store["rows_at_batch"] == 11
    rows = {c["name"]: c["rows"] for c in store["rows"] if c["rows"] is not None}
    assert rows == spark_rows
    text = "\n".join(_lines(capsys, "info", TWS))
    assert f"recent {spark_rows['recent']:>10,}".replace("recent", "recent" + " " * 26) in text
    assert "raw keys   89 RocksDB keys" in text


def test_metrics_serve_rows_per_state_variable(tws_db: str, spark_rows: dict[str, int]) -> None:
    server = start(tws_db)
    try:
        served = scrape(server)
    finally:
        stop(server)
    rows = {
        labels["state_var"]: value
        for labels, value in served["stateglass_state_variable_rows"]
        if labels["checkpoint"] == TWS and labels["store"] == "default"
    }
    assert rows == spark_rows
    raw = {labels["column_family"]: v for labels, v in served["stateglass_state_variable_raw_keys"]}
    assert raw["recent"] < spark_rows["recent"]
    (keys,) = [v for labels, v in served["stateglass_state_keys"] if labels["checkpoint"] == TWS]
    assert keys == sum(raw.values())


def _page(name: str) -> None:
    import importlib

    from stateglass.app.dashboard import context

    context.live_status()
    importlib.import_module(f"stateglass.app.dashboard.views.{name}").render()


def test_state_page_shows_rows_and_labels_raw_keys(tws_db: str, spark_rows: dict[str, int]) -> None:
    at = AppTest.from_function(_page, args=("state",), default_timeout=TIMEOUT_S)
    at.session_state["sg_checkpoint"] = TWS
    at.session_state["sg_store"] = STORE
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # Names from the checkpoint are escaped as Markdown (by\_kind).
    metrics = {m.label.replace("\\", ""): m.value for m in at.metric}
    assert "keys at batch 11" not in metrics
    assert metrics["raw RocksDB keys at batch 11"] == "89"
    assert {
        "stats rows": str(spark_rows["stats"]),
        "by_kind rows": str(spark_rows["by_kind"]),
        "recent rows": str(spark_rows["recent"]),
        "timers rows": str(spark_rows["$eventTimers_keyToTimestamp"]),
    }.items() <= metrics.items()


def test_overview_card_says_rows(tws_db: str, spark_rows: dict[str, int]) -> None:
    at = AppTest.from_function(_page, args=("overview",), default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    assert f"recent {spark_rows['recent']}" in captions.replace("\\", "")
    assert f"timers {spark_rows['$eventTimers_keyToTimestamp']}" in captions


def test_reports_say_rows(tws_db: str, tmp_path: Path, spark_rows: dict[str, int]) -> None:
    out = tmp_path / "report.md"
    code = cli_main(["report", TWS, "-o", str(out), "--db", tws_db, "--no-collect"])
    assert code == 0
    text = out.read_text().replace("\\", "")
    assert f"recent {spark_rows['recent']} · stats {spark_rows['stats']}" in text
    assert "raw RocksDB keys" in text
