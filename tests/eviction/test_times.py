"""Event times outside datetime's years (Spark's timestamps reach further) print as numbers,
never as a traceback on the Browse page or in the health rule."""

from __future__ import annotations

import pytest

from stateglass.app.analysis.health.state_leak import _ms
from stateglass.app.browse.overdue import utc_ms


@pytest.mark.parametrize("ms", [-62_135_596_800_001, 253_402_300_800_000, -(2**62), 2**62])
def test_out_of_range_event_times(ms: int) -> None:
    assert utc_ms(ms) == f"{ms} ms since the epoch"
    assert _ms(ms) == f"{ms} ms since the epoch"


def test_in_range_event_time() -> None:
    assert utc_ms(1_704_067_500_000) == "2024-01-01 00:05:00.000"
    assert _ms(1_704_067_500_000) == "2024-01-01 00:05:00"
