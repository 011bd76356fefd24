"""AppTest of the Health page: every rule's verdict, and the report download."""

from __future__ import annotations

from pathlib import Path

import pytest

from stateglass.app.analysis.health import RULES
from stateglass.app.dashboard.context import HEALTH_CONFIG_ENV
from tests.app.test_pages_core import run_page


def test_health_page_lists_every_rule_and_offers_the_report(samples_db: str) -> None:
    at = run_page("health")
    assert [t.value for t in at.title] == ["Health"]
    # The restart verdict leads the page (the first sample is healthy: it restarts).
    assert at.success and at.success[0].value.startswith("**Restart: restarts**")
    assert frame_first_rule(at) == "Restart verdict"
    # A static table (st.table) wraps long findings instead of cutting them.
    assert not at.dataframe
    (table,) = at.table
    frame = table.value
    assert len(frame) >= len(RULES)
    assert set(frame["status"]) <= {"OK", "WARN", "ERR", "SKIP"}
    # Not judged, and counted apart from OK: the rules on progress events (the samples have
    # none), and the stall on a sample cloned from git, whose file times are the clone's.
    skipped = frame[frame["status"] == "SKIP"]
    assert len(skipped) == 6
    assert skipped["finding"].str.contains("no progress events for this query").sum() == 5
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["not judged"] == "6" and metrics["rules OK"] == str(len(frame) - 6)
    # The stall says when the last batch ran on Spark's clock, with numbers.
    (stalled,) = frame[frame["rule"] == "Stalled query"]["finding"]
    assert "no query writes to a copy" in stalled and "batchTimestampMs" in stalled
    judged = frame[frame["status"] != "SKIP"]
    assert judged["finding"].str.contains(r"\d").all()

    # The sidebar's select cuts a long path; the caption under it gives it whole.
    picked = at.sidebar.selectbox[0].value
    assert any(picked in c.value for c in at.sidebar.caption)

    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    (download,) = at.get("download_button")
    assert "Download report" in str(download.proto.label)


def frame_first_rule(at: object) -> str:
    return str(at.table[0].value["rule"].iloc[0])  # type: ignore[attr-defined]


def test_a_config_file_turns_rules_off_and_the_page_says_so(
    samples_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "health.toml"
    config.write_text("[stalled_query]\nenabled = false\n")
    # What `stateglass dashboard --config FILE` hands the server.
    monkeypatch.setenv(HEALTH_CONFIG_ENV, str(config))
    at = run_page("health")
    assert not at.exception, [e.value for e in at.exception]
    (table,) = at.table
    assert "Stalled query" not in set(table.value["rule"])
    assert len(table.value) >= len(RULES) - 1
    note = [c.value for c in at.caption if "Turned off by" in c.value]
    assert note and "stalled_query" in note[0] and str(config) in note[0]
