"""The eviction audit on real queries: each one built to leak is flagged with its cause, the
healthy ones show zero overdue keys at every version, and the count itself matches Spark's
reader (``spark.read.format("statestore")``) filtered by Spark's predicate."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from stateglass.app.analysis.health import HealthConfig, evaluate
from stateglass.app.browse.overdue import EVENT_TIME_COLUMN, overdue_page
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_views import StateView
from stateglass.collectors.db.read import read_query
from stateglass.collectors.scan.eviction_audit import audit_store, store_rules
from tests.eviction.conftest import Queries

pytestmark = pytest.mark.slow

LEAKS = {
    "agg_no_watermark": ("never_evicted", "no watermark: an aggregation keeps every group"),
    "agg_watermark_not_in_key": (
        "never_evicted",
        "the grouping key holds no watermarked column",
    ),
    "dedup_no_watermark": ("never_evicted", "no watermark: dropDuplicates keeps every key"),
    "join_no_time_bound": ("join_value", "the join has no time bound"),
    "session_no_watermark_complete": (
        "never_evicted",
        "no watermark: a session window keeps every session forever",
    ),
    "session_watermark_elsewhere": (
        "never_evicted",
        "the query has a watermark, but not on the column of session_window(...)",
    ),
    "join_v3_no_watermark": (
        "never_evicted",
        "no watermark: a stream-stream join keeps every row of both sides forever",
    ),
    "join_v4_left_watermark": (
        "never_evicted",
        "the right input has no watermark",
    ),
}
HEALTHY = {
    "window_agg": {"default": "window"},
    "dedup_event_time": {"default": "dedup"},
    "dedup_within_watermark": {"default": "dedup_within_watermark"},
    "join_time_bound": {
        "left-keyToNumValues": "join_value",
        "left-keyWithIndexToValue": "join_value",
        "right-keyToNumValues": "join_value",
        "right-keyWithIndexToValue": "join_value",
    },
}


# The rows' event times span minutes, so a join side is judged against a widest time bound
# of one minute rather than the default day (tests/eviction/test_join_evidence.py).
MINUTE_BOUND = HealthConfig(
    state_leak=dataclasses.replace(HealthConfig().state_leak, join_max_bound_s=60)
)


def _leak_findings(q: Queries, name: str) -> list[Any]:
    findings = evaluate(q.db, q.roots[name], config=MINUTE_BOUND)
    return [f for f in findings if f.rule == "state_leak"]


@pytest.mark.parametrize("name", sorted(LEAKS))
def test_leaking_query_is_flagged_with_its_cause(queries: Queries, name: str) -> None:
    kind, cause = LEAKS[name]
    kinds = {
        r[0]
        for r in read_query(
            queries.db,
            "SELECT kind FROM eviction_rules WHERE checkpoint = ?",
            [queries.roots[name]],
        )
    }
    assert kind in kinds
    findings = _leak_findings(queries, name)
    warned = [f for f in findings if f.status == "WARN"]
    assert len(warned) == 1, findings  # once per operator
    assert cause in warned[0].finding
    assert warned[0].operator_id == 0


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_query_has_zero_overdue_at_every_version(queries: Queries, name: str) -> None:
    root = queries.roots[name]
    kinds = dict(
        read_query(
            queries.db, "SELECT store_name, kind FROM eviction_rules WHERE checkpoint = ?", [root]
        )
    )
    assert kinds == HEALTHY[name]
    # Every counted (store, partition, version) of a tracked store was audited.
    missing = read_query(
        queries.db,
        "SELECT count(*) FROM state_versions v JOIN eviction_rules r "
        "USING (checkpoint, operator_id, store_name) "
        "LEFT JOIN eviction_audit a USING (checkpoint, operator_id, store_name, partition_id, "
        "version) WHERE v.checkpoint = ? AND (r.audited OR r.store_name LIKE '%ToValue') "
        "AND a.version IS NULL",
        [root],
    )[0][0]
    assert missing == 0
    rows = read_query(
        queries.db,
        "SELECT count(*), count(overdue_keys), coalesce(sum(overdue_keys), 0), sum(keys), "
        "count(DISTINCT version) FROM eviction_audit WHERE checkpoint = ?",
        [root],
    )[0]
    audited_rows, counted, overdue, keys, versions = rows
    assert versions >= 4 and keys > 0
    if name.startswith("join"):
        assert counted == 0  # the time bound is not in the files: never a made-up count
    else:
        assert counted == audited_rows  # a watermark is known for every version
    assert overdue == 0
    findings = _leak_findings(queries, name)
    assert {f.status for f in findings} == {"OK"}, findings
    if name == "join_time_bound":
        assert "evicted by the join's time bound" in findings[0].finding


def test_complete_mode_keeps_overdue_windows(queries: Queries) -> None:
    """Complete mode: Spark never evicts, so every window behind the watermark is overdue;
    the rule names the count, the partitions and complete mode as the first cause."""
    root = queries.roots["window_agg_complete"]
    per_version = read_query(
        queries.db,
        "SELECT version, sum(overdue_keys), sum(keys) FROM eviction_audit "
        "WHERE checkpoint = ? GROUP BY version ORDER BY version",
        [root],
    )
    overdue = [o for _, o, _ in per_version]
    assert overdue[0] == 0 and overdue[-1] > 0
    assert overdue == sorted(overdue)  # nothing is ever removed
    (finding,) = [f for f in _leak_findings(queries, "window_agg_complete") if f.status == "WARN"]
    assert f"{overdue[-1]:,} overdue key(s)" in finding.finding
    assert "complete output mode never evicts" in finding.hint
    page = overdue_page(StateView(root), per_version[-1][0])
    assert page.found == overdue[-1] and page.table is not None
    assert page.table.num_rows == min(overdue[-1], 50)
    assert EVENT_TIME_COLUMN in page.table.column_names


def test_overdue_count_matches_spark_reader(queries: Queries, spark: Any) -> None:
    """Audit the windowed aggregation again with a watermark 10 minutes ahead: the keys the
    audit calls overdue are those Spark's own reader returns with ``window.end <= wm``."""
    from pyspark.sql import functions as F

    root = queries.roots["window_agg"]
    cp = Checkpoint.open(root)
    (rule,) = store_rules(cp, cp.stores(), has_watermark=True)
    last = cp.last_committed_batch
    assert last is not None
    wm = cp.offsets(last).batch_watermark_ms + 10 * 60_000
    rows, problems = audit_store(cp, rule, {p: [last + 1] for p in range(4)}, {last: wm})
    assert not problems
    ours = sum(r.overdue_keys or 0 for r in rows)
    state = spark.read.format("statestore").option("batchId", last).load(root)
    theirs = state.where(F.col("key.window.end") <= F.timestamp_millis(F.lit(wm))).count()
    assert ours == theirs > 0
    assert sum(r.keys for r in rows) == state.count()
