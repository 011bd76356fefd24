"""AppTest of the dashboard's pages on state that lives in DynamoDB: the DynamoDB sample
(sample_checkpoints/dynamodb) loaded into the session's moto server and collected once.

The pages read the store through the DynamoDB reader, as they read files; what they show is
checked against ``stateglass state`` at the same versions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app.dashboard.context import DB_ENV
from stateglass.collectors.db.read import read_query
from tests.dynamodb_fixtures import DynamoSample
from tests.e2e.oracle import ours

TIMEOUT_S = 60
PROVIDER = "stateglass.dynamo.DynamoStateStoreProvider"
LAST_VERSION = 5  # the sample ran batches 0..4


def _page(name: str) -> None:
    import importlib

    from stateglass.app.dashboard import context

    context.live_status()
    importlib.import_module(f"stateglass.app.dashboard.views.{name}").render()


@pytest.fixture
def sample(dynamodb_sample: DynamoSample, monkeypatch: pytest.MonkeyPatch) -> DynamoSample:
    monkeypatch.setenv(DB_ENV, dynamodb_sample.db)
    return dynamodb_sample


def open_page(name: str) -> AppTest:
    """The page on the database's one checkpoint (picked by default)."""
    at = AppTest.from_function(_page, args=(name,), default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def text(at: AppTest, kind: str = "caption") -> str:
    return " ".join(str(e.value) for e in at.get(kind))


Row = tuple[int, str, int, int]  # partition, key, count, sum


@pytest.fixture(scope="module")
def states(dynamodb_sample: DynamoSample, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``stateglass state`` at every version of the sample: (partition, key, count, sum)."""
    out: dict[int, set[Row]] = {}
    tmp = tmp_path_factory.mktemp("dynamodb-states")
    for version in range(1, LAST_VERSION + 1):
        args = ["state", dynamodb_sample.checkpoint, "--batch-id", str(version - 1)]
        rows = [json.loads(line) for line in ours([*args, "--jobs", "1"], tmp)]
        out[version] = {
            (r["partition_id"], r["key"]["k"], r["value"]["count"], r["value"]["sum"]) for r in rows
        }
    return out


def test_overview_card(sample: DynamoSample) -> None:
    at = open_page("overview")
    (query_id,) = read_query(sample.db, "SELECT query_id FROM checkpoints")[0]
    captions = text(at)
    assert query_id in captions and PROVIDER in captions
    assert len(at.get("plotly_chart")) == 1  # the card's sparkline of keys over versions
    (keys,) = read_query(
        sample.db,
        "SELECT sum(num_keys) FROM partition_newest WHERE checkpoint = ?",
        [sample.checkpoint],
    )[0]
    assert keys == 12 and "**12**" in text(at, "markdown")


def test_state_page_charts_and_restart_cost(sample: DynamoSample) -> None:
    at = open_page("state")
    assert len(at.get("plotly_chart")) >= 3
    assert sample.checkpoint in text(at)
    # A restart loads each partition's snapshot group (written at version 3) and replays the
    # two versions after it: the provider's entries are its snapshots and deltas.
    costs = next(d.value for d in at.dataframe if "base_version" in d.value.columns)
    assert set(costs["base_version"]) == {3} and set(costs["replays"]) == {2}
    assert set(costs["version"]) == {LAST_VERSION}


def test_browse_rows_equal_stateglass_state(sample: DynamoSample, states: Any) -> None:
    at = open_page("browse")
    slider = at.select_slider[0]
    assert slider.value == LAST_VERSION
    for version in (LAST_VERSION, 2):
        if version != slider.value:
            slider.set_value(version).run()
            assert not at.exception, [e.value for e in at.exception]
        (table,) = at.dataframe
        shown = {
            (int(p), k, int(n), int(s))
            for p, k, n, s in table.value[
                ["partition_id", "key.k", "value.count", "value.sum"]
            ].itertuples(index=False)
        }
        assert shown and shown == states[version], version
        slider = at.select_slider[0]


def test_diff_counts_what_changed(sample: DynamoSample, states: Any) -> None:
    at = open_page("diff")
    (slider,) = at.select_slider
    assert slider.value == (LAST_VERSION - 1, LAST_VERSION)
    before = {r[:2]: r[2:] for r in states[LAST_VERSION - 1]}
    after = {r[:2]: r[2:] for r in states[LAST_VERSION]}
    added = len(after.keys() - before.keys())
    removed = len(before.keys() - after.keys())
    changed = sum(1 for k in after.keys() & before.keys() if after[k] != before[k])
    assert changed > 0
    assert [m.value for m in at.metric] == [str(added), str(removed), str(changed)]


def test_key_history_follows_one_key(sample: DynamoSample, states: Any) -> None:
    at = open_page("key_history")
    at.text_input(key="sg_history_search").input("k00").run()
    assert not at.exception, [e.value for e in at.exception]
    (table,) = at.dataframe
    shown = [
        (int(v), int(n), int(s))
        for v, n, s in table.value[["version", "value.count", "value.sum"]].itertuples(index=False)
    ]
    expected = [
        (version, n, s) for version, rows in states.items() for _, k, n, s in rows if k == "k00"
    ]
    assert shown == expected and len(expected) == LAST_VERSION
    assert len(at.get("plotly_chart")) == 1
