"""AppTest: the dashboard explains a transformWithState key count (numKeys vs one variable's
rows) where Browse shows one state variable."""

from __future__ import annotations

from stateglass.app.dashboard.state_ui import RAW_KEYS_NOTE
from stateglass.collectors.db.read import read_query
from tests.app.test_pages_browse import TWS, open_page


def test_browse_of_one_state_variable_explains_the_raw_key_count(samples_db: str) -> None:
    at = open_page("browse", TWS)
    at.sidebar.selectbox(key="sg_state_var_widget").select("by_kind").run()
    assert RAW_KEYS_NOTE in [c.value for c in at.sidebar.caption]
    (table,) = at.dataframe
    # The note is needed: numKeys of the newest version exceeds by_kind's rows.
    [(raw,)] = read_query(
        samples_db,
        "SELECT sum(num_keys) FROM (SELECT num_keys FROM state_versions WHERE checkpoint = ? "
        "QUALIFY row_number() OVER (PARTITION BY partition_id ORDER BY version DESC) = 1)",
        [TWS],
    )
    assert raw > len(table.value)
