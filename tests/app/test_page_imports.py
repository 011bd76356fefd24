"""A page's cold process imports what drawing it needs, and the rest only when it is used.

Every dashboard page is a fresh interpreter's work the first time it is opened (and in
``bench_history.py``'s cold steps): Streamlit, pandas and Plotly's graph objects are its floor;
the planner, the state readers, remote storage, Spark and the health rules are not. Each case
runs a fresh interpreter: in this test process everything is imported already.
"""

from __future__ import annotations

import json
import subprocess
import sys

from pandas.testing import assert_frame_equal

from stateglass.app import queries
from stateglass.app.browse import growth
from stateglass.app.dashboard.views import state_forensics
from stateglass.app.queries.connection import read_frame

# Never imported by the modules of the database pages (their heavy work is elsewhere).
NOT_FOR_A_PAGE = (
    "plotly.express",
    "scipy",
    "fsspec",
    "s3fs",
    "aiobotocore",
    "botocore",
    "pyspark",
    "rocksdict",
    "multiprocessing",
    "stateglass.app.analysis.repartition.plan",
    "stateglass.app.browse.growth",
    "stateglass.app.browse.store",
    "stateglass.collectors.checkpoints.state_views",
    "stateglass.collectors.checkpoints.checkpoint",
    "stateglass.app.analysis.health",
    "stateglass.collectors.remote",
    "stateglass.collectors.checkpoints.state_reader",
)
# Imported by drawing the State page (its restart cost and growth sections open the checkpoint),
# never the planner (it waits for its button) nor the health rules.
NOT_FOR_THE_STATE_PAGE = (
    "plotly.express",
    "scipy",
    "fsspec",
    "s3fs",
    "pyspark",
    "rocksdict",
    "stateglass.app.analysis.repartition.plan",
    "stateglass.app.analysis.health",
)

PROBE = """
import json, logging, sys
logging.getLogger("streamlit").setLevel(logging.ERROR)
import stateglass.app.dashboard.context
for page in ("overview", "query", "state", "health"):
    __import__(f"stateglass.app.dashboard.views.{page}")
imported = sorted(sys.modules)
from streamlit.testing.v1 import AppTest
SCRIPT = (
    "from stateglass.app.dashboard import context\\n"
    "context.live_status()\\n"
    "from stateglass.app.dashboard.views import state\\n"
    "state.render()\\n"
)
at = AppTest.from_string(SCRIPT, default_timeout=120)
at.run()
print(json.dumps({
    "imported": imported,
    "drawn": sorted(sys.modules),
    "charts": len(at.get("plotly_chart")),
    "errors": [str(e.value) for e in at.exception],
}))
"""


def test_pages_import_no_planner_state_readers_spark_or_object_stores(samples_db: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout
    found = json.loads(out.splitlines()[-1])
    imported, drawn = set(found["imported"]), set(found["drawn"])
    # The probe really imported the pages (and pandas, which their frames need).
    assert {"stateglass.app.dashboard.views.state", "pandas", "streamlit"} <= imported
    assert sorted(m for m in NOT_FOR_A_PAGE if m in imported) == []
    # The State page was drawn, on a real store, with its charts.
    assert found["errors"] == []
    assert found["charts"] >= 5
    assert sorted(m for m in NOT_FOR_THE_STATE_PAGE if m in drawn) == []


def test_growth_defaults_are_the_attribution_s_own() -> None:
    """The State page draws the growth widgets without importing the attribution."""
    assert state_forensics.DEFAULT_WINDOW == growth.DEFAULT_WINDOW
    assert state_forensics.DEFAULT_TOP == growth.DEFAULT_TOP
    assert state_forensics.DEFAULT_WINDOW in state_forensics.WINDOWS


def test_state_growth_is_the_view_s_rows(samples_db: str) -> None:
    """The query computes the growth column after the store's filter: the same rows as the
    ``state_growth`` view, store by store."""
    with queries.session(samples_db):
        _state_growth_is_the_view_s_rows(samples_db)


def _state_growth_is_the_view_s_rows(samples_db: str) -> None:
    stores = read_frame(samples_db, "SELECT checkpoint, operator_id, store_name FROM operators")
    assert len(stores) > 10
    for cp, op, name in stores.itertuples(index=False):
        got = queries.state_growth(samples_db, cp, int(op), name)
        view = read_frame(
            samples_db,
            "SELECT version, batch_id, num_keys, keys_added, keys_updated, keys_removed, "
            "delta_bytes, keys_growth FROM state_growth "
            "WHERE checkpoint = ? AND operator_id = ? AND store_name = ? ORDER BY version",
            [cp, op, name],
        )
        assert_frame_equal(got.reset_index(drop=True), view, check_dtype=True), (cp, op, name)


def test_repartitions_skip_only_checkpoints_never_repartitioned(samples_db: str) -> None:
    """The guard that skips the view's window changes no answer: every checkpoint's
    repartitions as the view gives them, some of them real (Spark 4.2's samples)."""
    with queries.session(samples_db):
        assert _repartitions_as_the_view(samples_db) > 0


def _repartitions_as_the_view(samples_db: str) -> int:
    found = 0
    for cp in read_frame(samples_db, "SELECT checkpoint FROM checkpoints")["checkpoint"]:
        view = read_frame(
            samples_db,
            "SELECT batch_id, partitions_before, partitions_after AS shuffle_partitions "
            "FROM repartitions WHERE checkpoint = ? ORDER BY batch_id",
            [cp],
        )
        got = queries.repartitions(samples_db, cp)
        assert_frame_equal(got, view), cp
        store = read_frame(
            samples_db,
            "SELECT operator_id, store_name FROM partition_newest WHERE checkpoint = ? LIMIT 1",
            [cp],
        )
        if not store.empty:
            op, name = int(store["operator_id"].iloc[0]), str(store["store_name"].iloc[0])
            history = queries.store_history(samples_db, cp, op, name)
            assert history["repartitions"] == [tuple(r) for r in view.to_numpy().tolist()]
        found += len(view)
    return found
