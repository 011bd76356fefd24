"""Epoch-millisecond fields by Spark's contract read as timestamps on pages, raw beside."""

from __future__ import annotations

import pandas as pd

from stateglass.app.browse.cells import RAW_MS, epoch_ms_as_timestamps
from stateglass.app.browse.key_history import history_figure


def _history() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "version": [3, 4],
            "batch_id": [2, 3],
            "status": ["added", "changed"],
            "value.count": [1, 2],
            "value.ttlExpirationMs": pd.array([1795825335000, 1795825337000], dtype="Int64"),
        }
    )


def test_a_ttl_expiration_is_a_timestamp_with_the_raw_long_beside() -> None:
    frame = epoch_ms_as_timestamps(_history())
    assert list(frame["value.ttlExpirationMs"]) == ["2026-11-28 00:22:15", "2026-11-28 00:22:17"]
    assert list(frame[f"value.ttlExpirationMs{RAW_MS}"]) == [1795825335000, 1795825337000]
    # Fields not epoch milliseconds by Spark's contract stay numbers.
    assert list(frame["value.count"]) == [1, 2]


def test_key_history_draws_a_time_axis_for_an_expiration() -> None:
    frame = epoch_ms_as_timestamps(_history())
    fig = history_figure(frame, ["value.count", "value.ttlExpirationMs"], 0)
    counts, expirations = fig.data
    assert list(counts.y) == [1, 2]
    # A date axis, not 1.795825335T; the raw long on hover.
    assert pd.Timestamp(expirations.y[0]) == pd.Timestamp("2026-11-28 00:22:15")
    assert "ms)" in expirations.hovertemplate
    assert int(expirations.customdata[0][2]) == 1795825335000
