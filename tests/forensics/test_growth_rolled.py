"""Growth attribution rolled forward through the change files equals rebuilding each version.

The rolled reading rebuilds a partition at the window's two ends only; the reference
(``roll=False``) rebuilds it at every version of the window. Every figure of the result must
agree, on Spark-written samples of both providers (RocksDB with changelogs rolled through
them, without them through the SSTs neighbouring versions do not share), with removals
inside the window, several stores and column families, and with the share of all keys
sampled.
"""

from __future__ import annotations

import pytest

from stateglass.app.browse.growth import attribute_growth, window_versions
from stateglass.app.browse.rolling import roll
from stateglass.collectors.checkpoints.state_views import StateView, open_source, versions
from tests.collectors.helpers import SAMPLES

EVERYTHING = 10_000

VIEWS = [
    pytest.param(StateView(str(SAMPLES / "spark-4.3/agg-hdfs")), id="agg-hdfs"),
    pytest.param(StateView(str(SAMPLES / "spark-4.3/dedup-hdfs")), id="dedup-hdfs"),
    pytest.param(StateView(str(SAMPLES / "demo/late-rows")), id="late-rows-evicting"),
    pytest.param(StateView(str(SAMPLES / "spark-4.3/agg-rocks-cl")), id="agg-rocks-cl"),
    pytest.param(StateView(str(SAMPLES / "spark-4.3/session-rocks-cl")), id="session-rocks-cl"),
    pytest.param(StateView(str(SAMPLES / "spark-4.3/agg-rocks")), id="agg-rocks-no-changelog"),
    pytest.param(
        StateView(str(SAMPLES / "spark-4.3/join-hdfs"), store_name="left-keyWithIndexToValue"),
        id="join-hdfs-store",
    ),
    pytest.param(
        StateView(str(SAMPLES / "spark-4.3/tws-rocks-cl"), state_var="stats"), id="tws-value"
    ),
    # Past the sample size: the share of all keys now from every n-th key.
    pytest.param(StateView(str(SAMPLES / "demo/unbounded-state")), id="unbounded-sampled"),
]


@pytest.mark.parametrize("view", VIEWS)
def test_rolled_equals_rebuilt(view: StateView) -> None:
    window, sample = (5, 300) if "unbounded" in view.checkpoint else (10, 200_000)
    rolled = attribute_growth(view, window=window, top=EVERYTHING, share_sample=sample)
    rebuilt = attribute_growth(view, window=window, top=EVERYTHING, share_sample=sample, roll=False)
    assert rolled == rebuilt
    assert rolled.new_keys > 0 and sum(rolled.added) > 0


@pytest.mark.parametrize(
    ("name", "rolls"),
    [
        ("spark-4.3/agg-hdfs", True),
        ("spark-4.3/agg-rocks-cl", True),
        ("spark-4.3/agg-rocks", True),
    ],
)
def test_which_partitions_roll(name: str, rolls: bool) -> None:
    """Change files for every version roll, and so do RocksDB zips without changelogs (on
    the SSTs neighbouring versions do not share)."""
    view = StateView(str(SAMPLES / name))
    source = open_source(view.keyed(open_source(view).row_codec))
    base, steps = window_versions(versions(view), 10)
    rolled = roll(source, 0, base, steps, lambda: source.load_keys(0, base))
    assert (rolled is not None) == rolls
    if rolled is not None:
        assert len(rolled.added) == len(steps)
        assert rolled.num_keys == len(source.load_items(0, steps[-1]))


def test_steps_too_big_to_narrow_are_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step whose unshared SSTs name too many keys (a compaction) is read whole; the other
    steps stay narrowed, and the figures do not change."""
    from stateglass.app.browse import rolling

    narrowed = rolling.unshared_keys
    calls: list[int] = []

    def every_other(source: object, partition: int, before: int, after: int) -> object:
        calls.append(after)
        return None if after % 2 else narrowed(source, partition, before, after)  # type: ignore[arg-type]

    monkeypatch.setattr(rolling, "unshared_keys", every_other)
    view = StateView(str(SAMPLES / "spark-4.3/agg-rocks"))
    mixed = attribute_growth(view, window=4, top=EVERYTHING)
    assert any(v % 2 for v in calls) and any(v % 2 == 0 for v in calls)
    assert mixed == attribute_growth(view, window=4, top=EVERYTHING, roll=False)


def test_a_counter_that_must_drop_values_ranks_in_the_newest_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rolled from key sets, new keys are counted in the order the window touched them;
    when a field has too many values and must drop tied ones, which survive depends on
    the newest version's order: the ranking is done again reading whole, and agrees."""
    from stateglass.app.browse import growth

    view = StateView(str(SAMPLES / "demo/unbounded-state"))
    ranked_whole: list[bool] = []
    rank = growth._rank_new_values

    def spy(*args: object, from_keys: bool = True, jobs: int = 1) -> object:
        ranked_whole.append(not from_keys)
        return rank(*args, from_keys=from_keys, jobs=jobs)  # type: ignore[arg-type]

    monkeypatch.setattr(growth, "MAX_VALUES", 4)
    monkeypatch.setattr(growth, "_rank_new_values", spy)
    rolled = attribute_growth(view, window=5, top=EVERYTHING, share_sample=300)
    assert rolled.approximate and ranked_whole == [False, True]
    assert rolled == attribute_growth(view, window=5, top=EVERYTHING, share_sample=300, roll=False)


@pytest.mark.parametrize("name", ["spark-4.3/agg-hdfs", "spark-4.3/agg-rocks"])
def test_partitions_rolled_in_worker_processes_give_the_same_figures(name: str) -> None:
    view = StateView(str(SAMPLES / name))
    serial = attribute_growth(view, window=10, top=EVERYTHING)
    assert attribute_growth(view, window=10, top=EVERYTHING, jobs=2) == serial
