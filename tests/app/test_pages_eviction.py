"""AppTest smoke tests of the eviction audit on the pages: Browse's "Overdue only" toggle and
the State page's audit section, on the sample checkpoints (healthy: zero overdue)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.app.test_pages_browse import AGG, open_page

JOIN = AGG.replace("agg-hdfs", "join-hdfs")


def _texts(at: AppTest) -> str:
    parts = [
        str(e.value) for kind in ("success", "warning", "info", "caption") for e in at.get(kind)
    ]
    return " ".join(parts)


def test_browse_overdue_toggle_on_a_healthy_sample(samples_db: str) -> None:
    at = open_page("browse", AGG)
    at.toggle(key="sg_browse_overdue").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.dataframe  # the normal page is replaced by the filter's result
    (ok,) = at.success
    assert "No overdue keys" in ok.value and "none of 14 rows" in ok.value
    assert "window.end <= watermark" in ok.value


def test_browse_overdue_toggle_on_a_join_says_why_not(samples_db: str) -> None:
    at = open_page("browse", JOIN)
    at.toggle(key="sg_browse_overdue").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "time bound is not recorded" in _texts(at)


def test_state_page_shows_the_audit(samples_db: str) -> None:
    at = open_page("state", AGG)
    assert not at.exception, [e.value for e in at.exception]
    assert any(h.value == "Eviction audit" for h in at.subheader)
    assert "window.end <= watermark" in _texts(at)
