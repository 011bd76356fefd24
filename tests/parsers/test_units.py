"""Sizes and times read the same on every screen, and an unknown one prints one marker."""

from __future__ import annotations

import pandas as pd
import pytest

from stateglass.parsers.units import UNKNOWN, fmt_age, fmt_bytes, fmt_duration, fmt_ms


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(0, "0 B", id="zero"),
        pytest.param(1023, "1,023 B", id="bytes"),
        pytest.param(1536, "1.5 KiB", id="kib"),
        pytest.param(5 << 20, "5.0 MiB", id="mib"),
        pytest.param(3 << 40, "3,072.0 GiB", id="gib-is-the-largest"),
        pytest.param(-2048, "-2.0 KiB", id="negative"),
    ],
)
def test_bytes(value: int, text: str) -> None:
    assert fmt_bytes(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0.045, "45ms", id="ms"),
        pytest.param(0.9999, "1.0s", id="rounds-up-to-a-second"),
        pytest.param(4.5, "4.5s", id="seconds-tenths"),
        pytest.param(30, "30s", id="seconds"),
        pytest.param(300, "5m 0s", id="minutes"),
        pytest.param(7200, "2.0h", id="hours"),
        pytest.param(354240, "4.1d", id="days"),
        pytest.param(-90, "-1m 30s", id="negative"),
    ],
)
def test_durations(seconds: float, text: str) -> None:
    assert fmt_duration(seconds) == text
    assert fmt_ms(seconds * 1000) == text


def test_ages_say_which_clock_is_ahead() -> None:
    assert fmt_age(725) == "12m 5s ago"
    assert fmt_age(-30) == "30s ahead of this clock"


@pytest.mark.parametrize("missing", [None, float("nan"), pd.NA], ids=["none", "nan", "pd-na"])
def test_one_marker_for_what_is_not_known(missing: object) -> None:
    got = {fmt_bytes(missing), fmt_duration(missing), fmt_ms(missing), fmt_age(missing)}
    assert got == {UNKNOWN}
