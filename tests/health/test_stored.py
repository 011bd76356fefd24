"""Stored health verdicts are read only while they hold: judged after the checkpoint's last
scan, with the reader's thresholds. Otherwise the reader judges fresh, as before."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from stateglass.collectors.db import Database, read_query
from stateglass.collectors.health import evaluate_many, load_config
from stateglass.collectors.health.stored import config_key, stored_many
from stateglass.collectors.scan import Scanner
from tests.conftest import SAMPLES, copy_checkpoint


def _rules(found: object) -> set[str]:
    assert isinstance(found, list), found
    return {f.rule for f in found}


def test_stored_verdicts_hold_until_a_scan_or_other_thresholds(tmp_path: Path) -> None:
    cp = str(copy_checkpoint(SAMPLES / "spark-4.3" / "dedup-hdfs", tmp_path / "cp"))
    db_path = str(tmp_path / "sg.duckdb")
    config_file = tmp_path / "thresholds.toml"
    config_file.write_text("[holes]\nenabled = false\n")
    holes_off = load_config(str(config_file))
    db = Database(db_path)
    Scanner(db, judge=True, health=holes_off).scan(cp)
    now = datetime.now(tz=UTC)
    stored = stored_many(db_path, [cp], now, holes_off)[cp]
    assert stored == evaluate_many(db_path, [cp], now, holes_off)[cp]
    assert "holes" not in _rules(stored)
    # Other thresholds (every default): not the stored verdicts, the rules judged afresh.
    assert "holes" in _rules(stored_many(db_path, [cp])[cp])

    # What a reader returns is what was stored: a verdict the rules would not give shows.
    (last_scan,) = read_query(db_path, "SELECT last_scan FROM checkpoints")[0]
    judged = {
        "checkpoint": cp,
        "scan_at": last_scan,
        "judged_at": last_scan,
        "config_key": config_key(holes_off),
        "worst": "ERR",
    }
    planted = {
        "checkpoint": cp,
        "seq": 0,
        "rule": "holes",
        "title": "Holes",
        "status": "ERR",
        "finding": "planted",
        "hint": "",
        "operator_id": None,
        "store_name": None,
        "partition_id": None,
    }
    db.record_verdicts(judged, [planted])
    shown = stored_many(db_path, [cp], config=holes_off)[cp]
    assert "planted" in {f.finding for f in shown}  # type: ignore[union-attr]
    # A scan that did not judge (a `collect`) makes the stored verdicts stale.
    Scanner(db).scan(cp)
    found = stored_many(db_path, [cp], config=holes_off)[cp]
    assert "planted" not in {f.finding for f in found} and "holes" not in _rules(found)
