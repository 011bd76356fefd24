"""``state_leak`` judges a join side that has removed nothing only on evidence.

The join's time bound is not in the checkpoint: until Spark first evicts, a healthy join
with a wide bound writes the same files as a join with none, and the watermark draws away
from the oldest value in both at the same pace. Being behind the watermark is not evidence;
being behind it by more than the widest bound a join is taken to have
(``state_leak.join_max_bound_s``, a day by default), at ``min_versions`` versions, is. Both
joins below are real PySpark queries (tests/eviction/conftest.py) over the same rows, whose
event times span minutes: the rule is judged at the default and at bounds below and above
what the rows reach.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from stateglass.app.analysis.health import HealthConfig, evaluate
from stateglass.collectors.db.read import read_query
from tests.eviction.conftest import Queries

pytestmark = pytest.mark.slow

VALUE_STORE = "left-keyWithIndexToValue"


def _bound(seconds: float) -> HealthConfig:
    leak = dataclasses.replace(HealthConfig().state_leak, join_max_bound_s=seconds)
    return HealthConfig(state_leak=leak)


def _state_leak(q: Queries, name: str, config: HealthConfig | None = None) -> list[Any]:
    return [f for f in evaluate(q.db, q.roots[name], config=config) if f.rule == "state_leak"]


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
    # versions and more, which earlier readings of the rule called a leak.
    assert _removed(queries, "join_wide_bound") == 0
    assert len(lags) >= 3
    assert max(lags) < 2 * 3600 * 1000  # the watermark has not passed the two-hour bound
    for config in (None, _bound(3 * 3600)):
        leak = _state_leak(queries, "join_wide_bound", config)
        assert {f.status for f in leak} == {"OK"}, leak
        assert "no value removed yet" in leak[0].finding


def test_a_join_without_a_bound_is_flagged_once_past_the_widest_bound(queries: Queries) -> None:
    lags = _lags(queries, "join_no_time_bound")
    assert _removed(queries, "join_no_time_bound") == 0
    # Early in its life (minutes of event time) it looks like a healthy wide-bound join.
    early = _state_leak(queries, "join_no_time_bound")
    assert {f.status for f in early} == {"OK"}, early
    # With a widest bound its lag passes at three versions or more, it is flagged.
    below = sorted(lags)[-3] - 1
    assert below > 0
    (warn,) = [f for f in _state_leak(queries, "join_no_time_bound", _bound(below / 1000))]
    assert warn.status == "WARN", warn
    assert "no value ever removed" in warn.finding
    assert "state_leak.join_max_bound_s" in warn.finding
