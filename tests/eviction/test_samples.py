"""The eviction audit on the shipped samples and on the corpus: every healthy operator shows
zero overdue keys at every version, and each store gets the rule Spark applies to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from stateglass.app.analysis.health import evaluate
from stateglass.app.browse.overdue import overdue_page
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_views import StateView
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.eviction_audit import audit_store, store_rules
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES, SamplesDb

pytestmark = pytest.mark.slow

# Sample -> (store or timer variable, kind of rule).
KINDS = {
    "spark-4.3/agg-hdfs": {"default": "window"},
    "spark-4.3/agg-rocks": {"default": "window"},
    "spark-4.3/agg-rocks-cl": {"default": "window"},
    "spark-3.5/agg-hdfs": {"default": "window"},
    "spark-3.5/agg-rocks": {"default": "window"},
    "spark-4.3/dedup-hdfs": {"default": "dedup"},
    "spark-4.3/session-rocks-cl": {"default": "session_window"},
    "spark-4.3/fmgws-hdfs": {"default": "event_time_timeout"},
    "spark-4.3/tws-rocks-cl": {"default/$eventTimers_keyToTimestamp": "event_time_timers"},
    "spark-4.3/join-hdfs": {
        "left-keyToNumValues": "join_value",
        "left-keyWithIndexToValue": "join_value",
        "right-keyToNumValues": "join_value",
        "right-keyWithIndexToValue": "join_value",
    },
    "spark-4.3/window-progress": {"default": "window"},
}


@pytest.fixture(scope="module")
def samples_db(all_samples_db: SamplesDb) -> tuple[str, dict[str, str]]:
    """The session's database of every sample (collected once, audit included)."""
    return all_samples_db.path, {name: all_samples_db.roots[name] for name in KINDS}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_sample_zero_overdue_at_every_version(
    samples_db: tuple[str, dict[str, str]], name: str
) -> None:
    db, roots = samples_db
    root = roots[name]
    kinds = {
        (store + (f"/{var}" if var else "")): kind
        for store, var, kind in read_query(
            db,
            "SELECT store_name, state_var, kind FROM eviction_rules WHERE checkpoint = ?",
            [root],
        )
    }
    assert kinds == KINDS[name]
    audited, judged, overdue, versions = read_query(
        db,
        "SELECT count(*), count(overdue_keys), coalesce(sum(overdue_keys), 0), "
        "count(DISTINCT version) FROM eviction_audit WHERE checkpoint = ?",
        [root],
    )[0]
    # Every version of the sample was audited (8 or 12 batches), at a known watermark.
    assert versions >= 8
    if name != "spark-4.3/join-hdfs":
        assert judged == audited
    assert overdue == 0
    leak = [f for f in evaluate(db, root) if f.rule == "state_leak"]
    assert {f.status for f in leak} == {"OK"}, leak


def test_audit_is_not_vacuous(samples_db: tuple[str, dict[str, str]]) -> None:
    """The same predicate flags keys once the watermark is moved past them: a store whose
    keys were never compared would pass the zero test too."""
    cp = Checkpoint.open(str(SAMPLES / "spark-4.3/agg-hdfs"))
    (rule,) = store_rules(cp, cp.stores(), has_watermark=True)
    far = 2_000_000_000_000  # 2033: past every window of the sample
    rows, problems = audit_store(cp, rule, {p: [12] for p in range(4)}, {11: far})
    assert not problems
    assert sum(r.overdue_keys or 0 for r in rows) == sum(r.keys for r in rows) == 14


def test_browse_overdue_filter_examples() -> None:
    """Browse's filter: none at the sample's own watermark; with the predicate's watermark far
    ahead every row comes back, with the event time it compared."""
    view = StateView(str(SAMPLES / "spark-4.3/dedup-hdfs"))
    page = overdue_page(view, 12)
    assert page.rule.kind == "dedup" and page.watermark_ms and page.watermark_ms > 0
    assert page.found == 0 and page.scanned == 30
    assert page.table is not None and page.table.num_rows == 0


# Corpus scenarios whose state Spark evicts by event time (the others have no watermark).
EVICTING = ("winagg", "dedup-", "dedupww", "session", "fmgws", "twsevt", "join")


def test_corpus_healthy_operators_zero_overdue(fixture_corpus: Path, tmp_path: Path) -> None:
    """Every audited store of the corpus shows zero overdue keys at every version, and every
    kind of rule is met. (Not audited there: join state formats 3/4 in column families, and
    Spark 3.5's RocksDB session windows, whose rows StateGlass does not decode yet.)"""
    db = Database(str(tmp_path / "corpus.duckdb"))
    kinds: dict[str, int] = {}
    for cp_dir in sorted(fixture_corpus.glob("*/*/checkpoint")):
        scenario = cp_dir.parent.name
        if not scenario.startswith(EVICTING) or not cp_dir.joinpath("commits").is_dir():
            continue
        root = scan_checkpoint(db, str(cp_dir)).checkpoint
        rows = read_query(
            db.path,
            "SELECT store_name, state_var, version, partition_id, overdue_keys "
            "FROM eviction_audit WHERE checkpoint = ? AND overdue_keys > 0",
            [root],
        )
        assert rows == [], (cp_dir, rows[:5])
        for kind, judged in read_query(
            db.path,
            "SELECT r.kind, count(a.version) FROM eviction_rules r LEFT JOIN eviction_audit a "
            "USING (checkpoint, operator_id, store_name, state_var) WHERE r.checkpoint = ? "
            "GROUP BY r.kind",
            [root],
        ):
            kinds[kind] = kinds.get(kind, 0) + judged
        leak = [f for f in evaluate(db.path, root) if f.rule == "state_leak"]
        assert {f.status for f in leak} == {"OK"}, (cp_dir, leak)
    for kind in (
        "window",
        "session_window",
        "dedup",
        "dedup_within_watermark",
        "join_value",
        "event_time_timeout",
        "event_time_timers",
    ):
        assert kinds.get(kind, 0) > 0, kinds


def test_collect_without_the_audit(tmp_path: Path) -> None:
    """``collect --no-eviction-audit`` writes the rules (each audited store says it was
    skipped, and why) but no audit rows; the default audits."""
    import subprocess
    import sys

    sample = str(SAMPLES / "spark-4.3/agg-hdfs")
    for flag, db in (
        ([], tmp_path / "on.duckdb"),
        (["--no-eviction-audit"], tmp_path / "off.duckdb"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "stateglass.app.cli", "collect", sample, "--db", str(db), *flag],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    on = read_query(str(tmp_path / "on.duckdb"), "SELECT count(*) FROM eviction_audit")[0][0]
    assert on > 0
    off = str(tmp_path / "off.duckdb")
    assert read_query(off, "SELECT count(*) FROM eviction_audit")[0][0] == 0
    ((kind, cause),) = read_query(off, "SELECT kind, cause FROM eviction_rules")
    assert kind == "not_audited"
    assert "--no-eviction-audit" in cause
    leak = evaluate(off, read_query(off, "SELECT checkpoint FROM checkpoints")[0][0])
    (finding,) = [f for f in leak if f.rule == "state_leak"]
    assert "not audited" in finding.finding
