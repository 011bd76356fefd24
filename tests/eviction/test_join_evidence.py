"""``state_leak`` judges a join side that has removed nothing only on evidence.

The join's time bound is not in the checkpoint: until Spark first evicts, a healthy join
with a wide bound writes the same files as a join with none. Being behind the watermark is
not yet evidence; being behind it by more than the range the store already held, at
``min_versions`` versions, is. Both joins below are real PySpark queries (tests/eviction/
conftest.py) over the same rows.
"""

from __future__ import annotations

import pytest

from stateglass.collectors.db import read_query
from stateglass.collectors.health import evaluate
from tests.eviction.conftest import Queries

pytestmark = pytest.mark.slow

VALUE_STORE = "left-keyWithIndexToValue"


def _lags(q: Queries, name: str) -> list[int]:
    """Per version, how far the watermark is past the side's oldest value (ms; behind only)."""
    rows = read_query(
        q.db,
        "SELECT max(watermark_ms) - min(oldest_event_ms) FROM eviction_audit "
        "WHERE checkpoint = ? AND store_name = ? GROUP BY version ORDER BY version",
        [q.roots[name], VALUE_STORE],
    )
    return [lag for (lag,) in rows if lag is not None and lag > 0]


def _removed(q: Queries, name: str) -> int:
    return int(
        read_query(
            q.db,
            "SELECT coalesce(sum(keys_removed), 0) FROM state_versions WHERE checkpoint = ?",
            [q.roots[name]],
        )[0][0]
    )


def test_a_wide_bound_early_in_life_is_not_a_leak(queries: Queries) -> None:
    lags = _lags(queries, "join_wide_bound")
    # The case itself: nothing evicted yet, and the oldest value behind the watermark at three
    # versions, which the rule's old reading ("behind at min_versions versions") called a leak.
    assert _removed(queries, "join_wide_bound") == 0
    assert len(lags) >= 3
    assert max(lags) < 2 * 3600 * 1000  # the watermark has not passed the two-hour bound
    findings = [f for f in evaluate(queries.db, queries.roots["join_wide_bound"])]
    leak = [f for f in findings if f.rule == "state_leak"]
    assert {f.status for f in leak} == {"OK"}, leak
    assert "no value removed yet" in leak[0].finding


def test_a_join_without_a_bound_is_judged_on_the_same_evidence(queries: Queries) -> None:
    lags = _lags(queries, "join_no_time_bound")
    assert _removed(queries, "join_no_time_bound") == 0
    beyond = [lag for lag in lags if lag > lags[0]]
    assert len(beyond) >= 3  # behind by more than the retained range at three versions
    (warn,) = [
        f
        for f in evaluate(queries.db, queries.roots["join_no_time_bound"])
        if f.rule == "state_leak" and f.status == "WARN"
    ]
    assert "no value ever removed" in warn.finding
    assert "more than the 165 s the store already held" in warn.finding
