"""Stored health verdicts are read only while they hold: judged after the checkpoint's last
scan, with the reader's thresholds. Otherwise the reader judges fresh, as before."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from stateglass.app.analysis.health import CLOCK_RULES, evaluate_many, judge
from stateglass.app.analysis.health.stored import (
    config_key,
    judge_stored,
    stored_many,
    storing_verdicts,
)
from stateglass.app.settings import load_settings
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import Scanner
from tests.conftest import SAMPLES, copy_checkpoint, with_spark_file_times


def _rules(found: object) -> set[str]:
    assert isinstance(found, list), found
    return {f.rule for f in found}


def test_stored_verdicts_hold_until_a_scan_or_other_thresholds(tmp_path: Path) -> None:
    cp = str(copy_checkpoint(SAMPLES / "spark-4.3" / "dedup-hdfs", tmp_path / "cp"))
    db_path = str(tmp_path / "sg.duckdb")
    config_file = tmp_path / "thresholds.toml"
    config_file.write_text("[holes]\nenabled = false\n")
    holes_off = load_settings(str(config_file)).health
    db = Database(db_path)
    Scanner(db, after_write=storing_verdicts(holes_off)).scan(cp)
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


def _at(path: Path, epoch_s: float) -> None:
    os.utime(path, (epoch_s, epoch_s))


def _dying_query(cp: Path, t0: float) -> None:
    """``cp`` as a query that died in batch 11 seconds before ``t0``, leaving temporary files
    and an SST no zip references behind."""
    os.remove(cp / "commits" / "11")  # offsets of batch 11 written, no commit
    _at(cp / "offsets" / "10", t0 - 6)  # batch 10 took a second
    _at(cp / "commits" / "10", t0 - 5)
    _at(cp / "offsets" / "11", t0 - 2)
    part = cp / "state" / "0" / "0"
    # Two temporary files, 10 minutes old two seconds apart: the rule counts one, then both.
    for name, age in (("13.zip.0b8e5c1e", 1), ("12.zip.5a1d7e20", 3)):
        leftover = part / f".{name}-2f7a-4b4e-9d43-3c1c2b0f8a11.tmp"
        shutil.copyfile(part / "12.zip", leftover)
        _at(leftover, t0 - age)
    stray = part / "SSTs" / "000999-6f1c8a52-8a8e-4d43-a1de-3b3c71f1f0a4.sst"
    shutil.copyfile(next((part / "SSTs").glob("*.sst")), stray)
    _at(stray, t0 - 4)
    _at(part / "12.zip", t0 - 3)  # the stray is older than the newest zip: not in flight


def test_clock_rules_from_stored_facts_equal_a_full_judgement_at_any_moment(
    tmp_path: Path,
) -> None:
    """Readers apply their clock to the facts the watcher stored: at every moment, on either
    side of each clock rule's thresholds, that gives what judging the whole history then
    gives, finding for finding; before the facts were read, the reader judges afresh."""
    cp = with_spark_file_times(
        copy_checkpoint(SAMPLES / "spark-4.3" / "agg-rocks", tmp_path / "cp")
    )
    # The query died 2 seconds into batch 11, on Spark's clock: the files' times follow it.
    t0 = json.loads((cp / "offsets" / "11").read_text().split("\n")[1])["batchTimestampMs"] / 1000
    _dying_query(cp, t0 + 2)
    t0 += 2
    db_path = str(tmp_path / "sg.duckdb")
    root = Scanner(Database(db_path), after_write=storing_verdicts()).scan(str(cp)).checkpoint
    (stored_facts,) = read_query(db_path, "SELECT clock_facts FROM health_judged")[0]
    as_of = datetime.fromisoformat(json.loads(stored_facts)["as_of"]).replace(tzinfo=UTC)
    # A second either side of each default threshold: no commit for 5 minutes, batch 11
    # running for 5 and 60, the newer temporary file 10 minutes old; the moment the facts
    # were read, and a second before it.
    moments = {as_of, as_of - timedelta(seconds=1), as_of + timedelta(days=2)}
    for since, threshold in ((t0 - 5, 300), (t0 - 2, 300), (t0 - 2, 3600), (t0 - 1, 600)):
        for side in (-1, 1):
            moments.add(datetime.fromtimestamp(since + threshold + side, tz=UTC))
    seen: dict[str, set[str]] = {}
    orphans: dict[datetime, str] = {}
    for now in sorted(moments):
        shown = stored_many(db_path, [root], now)[root]
        assert shown == evaluate_many(db_path, [root], now)[root], now
        assert isinstance(shown, list)
        for f in shown:
            if f.rule in CLOCK_RULES:
                seen.setdefault(f.rule, set()).add(f.status)
            if f.rule == "orphans":
                orphans[now] = f.finding
    # The older temporary file counts first, then both.
    newer_aged = t0 - 1 + 600
    assert "1 temporary files" in orphans[datetime.fromtimestamp(newer_aged - 1, tz=UTC)]
    assert "2 temporary files" in orphans[datetime.fromtimestamp(newer_aged + 1, tz=UTC)]
    # The clock crossed every rule's thresholds in the sweep.
    assert seen == {
        "stalled_query": {"OK", "WARN"},
        "stuck_batch": {"OK", "WARN", "ERR"},
        "orphans": {"OK", "WARN"},
    }
    # What a reader shows comes from the stored facts, not from the history again.
    facts = json.loads(stored_facts)
    facts["rules"]["stalled_query"]["batch"] = 999
    with duckdb.connect(db_path) as conn:
        conn.execute("UPDATE health_judged SET clock_facts = ?", [json.dumps(facts)])
    later = stored_many(db_path, [root], as_of + timedelta(hours=1))[root]
    assert isinstance(later, list)
    assert any("since batch 999" in f.finding for f in later if f.rule == "stalled_query")


def test_the_health_page_reads_the_stored_verdict_and_judges_progress_now(tmp_path: Path) -> None:
    """``judge_stored`` answers as ``judge`` does, from what the watcher stored: the restart
    verdict and the history's rules as stored, the progress rules judged now (progress events
    arrive between scans); a verdict stored without the restart one is judged afresh."""
    cp = str(copy_checkpoint(SAMPLES / "spark-4.3" / "agg-rocks", tmp_path / "cp"))
    db_path = str(tmp_path / "sg.duckdb")
    root = Scanner(Database(db_path), after_write=storing_verdicts()).scan(cp).checkpoint
    now = datetime.now(tz=UTC)
    verdict, found = judge(db_path, root, now)
    assert judge_stored(db_path, root, now) == (verdict.to_json(), found)

    (stored,) = read_query(db_path, "SELECT clock_facts FROM health_judged")[0]
    facts = json.loads(stored)
    facts["restart"]["reason"] = "planted"
    with duckdb.connect(db_path) as conn:
        conn.execute("UPDATE health_judged SET clock_facts = ?", [json.dumps(facts)])
        conn.execute(
            "UPDATE health_findings SET finding = 'planted' "
            "WHERE rule IN ('holes', 'falling_behind')"
        )
    shown_verdict, shown = judge_stored(db_path, root, now)
    assert shown_verdict["reason"] == "planted"
    planted = {f.rule for f in shown if f.finding == "planted"}
    assert planted == {"holes"}, planted  # falling_behind is judged again
    assert [f.rule for f in shown] == [f.rule for f in found]

    del facts["restart"]
    with duckdb.connect(db_path) as conn:
        conn.execute("UPDATE health_judged SET clock_facts = ?", [json.dumps(facts)])
    assert judge_stored(db_path, root, now) == (verdict.to_json(), found)
