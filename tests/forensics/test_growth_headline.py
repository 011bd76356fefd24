"""The growth headline names a lead only where one value stands out."""

from __future__ import annotations

from stateglass.app.browse.growth import Contributor, GrowthAttribution
from stateglass.collectors.checkpoints.state_views import StateView


def _attribution(*keys: int) -> GrowthAttribution:
    total = sum(keys)
    return GrowthAttribution(
        view=StateView("/cp"),
        base=3,
        newest=6,
        new_keys=total,
        steps=(4, 5, 6),
        added=(total, 0, 0),
        contributors=tuple(
            Contributor("user", f'"u{i}"', n, n / total, (n, 0, 0), n / total)
            for i, n in enumerate(keys)
        ),
        fields=("user",),
    )


def test_equal_shares_name_no_value() -> None:
    sentence = _attribution(4, 4, 4).sentence()
    assert sentence == (
        "No value stands out: the 12 keys added since version 3 spread evenly, 3 values of "
        "user at 33% each"
    )


def test_a_value_ahead_of_the_others_is_named() -> None:
    assert _attribution(8, 2, 2).sentence() == (
        'user = "u0" accounts for 67% of the 12 keys added since version 3'
    )
