"""The shipped demo (``sample_checkpoints/demo/``): each story makes its health rule fire.

Collected once, as ``make run`` does (checkpoints plus the demo's event log), and judged with
``sample_checkpoints/demo.toml`` (the samples are finished runs: no stalled-query verdict).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest

from stateglass.app.analysis.health import Finding, evaluate
from stateglass.app.collecting import collect_progress
from stateglass.app.settings import load_settings
from stateglass.collectors.db.writer import Database
from stateglass.collectors.progress import check_location
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES

DEMO = SAMPLES / "demo"
CONFIG = SAMPLES / "demo.toml"
EVENTLOG = SAMPLES / "eventlogs" / "demo"
MAX_BYTES = 20 * 1024 * 1024

# story -> (rule, status) it exists to show.
INTENDED = {
    "unbounded-state": ("unbounded_state", "WARN"),
    "skewed-join": ("partition_skew", "WARN"),
    "snapshot-lag": ("snapshot_lag", "WARN"),
    "purged-history": ("retention", "WARN"),
    "late-rows": ("late_rows", "WARN"),
    "leaking-windows": ("state_leak", "WARN"),
}
# Rules that rightly join in: state that grows without bound because nothing can evict it
# is also a state leak (no watermark), and that finding names the cause.
ALSO = {"unbounded-state": {"state_leak"}}
# The transformWithState story is a version-tagged sample (see sample_checkpoints/README.md).
TWS = SAMPLES / "spark-4.3" / "tws-rocks-cl"


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Finding]]]:
    db_path = str(tmp_path_factory.mktemp("demo") / "demo.duckdb")
    db = Database(db_path)
    paths = {story: DEMO / story for story in os.listdir(DEMO)} | {"tws": TWS}
    for path in paths.values():
        scan_checkpoint(db, str(path))
    collect_progress(db, [check_location(str(EVENTLOG))], quiet_when_empty=True)
    config = load_settings(str(CONFIG)).health
    yield {story: evaluate(db_path, str(path), config=config) for story, path in paths.items()}


def test_every_story_is_covered() -> None:
    assert sorted(os.listdir(DEMO)) == sorted([*INTENDED, "healthy"])


def test_the_readme_counts_the_stories_there_are() -> None:
    readme = (SAMPLES.parent / "README.md").read_text(encoding="utf-8")
    said = re.search(r"among them (\w+) small \*\*demo stories\*\*", readme)
    assert said is not None, "the README's first five minutes name the demo stories"
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    assert said.group(1) == words[len(os.listdir(DEMO))]


@pytest.mark.parametrize(("story", "rule", "status"), [(s, *rs) for s, rs in INTENDED.items()])
def test_story_fires_its_rule(
    judged: dict[str, list[Finding]], story: str, rule: str, status: str
) -> None:
    found = [f for f in judged[story] if f.rule == rule]
    assert {f.status for f in found} == {status}, found
    # Only that story's rule complains (the demo is old, but demo.toml says so).
    # Not judged (SKIP) is no complaint: no progress events, or a stall on Spark's clock.
    others = {f.rule for f in judged[story] if f.status not in ("OK", "SKIP")}
    assert others == {rule} | ALSO.get(story, set()), [f for f in judged[story] if f.status != "OK"]
    if story == "unbounded-state":
        (leak,) = [f for f in judged[story] if f.rule == "state_leak"]
        assert "can never be evicted" in leak.finding, leak


@pytest.mark.parametrize("story", ["healthy", "tws"])
def test_healthy_stories_are_all_ok(judged: dict[str, list[Finding]], story: str) -> None:
    assert [f for f in judged[story] if f.status not in ("OK", "SKIP")] == []
    rules = {f.rule for f in judged[story]}
    assert "unbounded_state" in rules and "stalled_query" not in rules


def test_tws_timers_evict(judged: dict[str, list[Finding]]) -> None:
    (finding,) = [f for f in judged["tws"] if f.rule == "unbounded_state"]
    removed = finding.finding.split(" removed vs ")[0].rsplit(" ", 1)[-1]
    assert int(removed.replace(",", "")) > 0, finding.finding


def test_samples_stay_under_20_mb() -> None:
    """What ``du -s`` counts (allocated blocks, directories included), not just file sizes."""
    used = 0
    for root, dirs, files in os.walk(SAMPLES):
        for name in [*dirs, *files]:
            used += os.lstat(os.path.join(root, name)).st_blocks * 512
    apparent = sum(
        os.lstat(os.path.join(root, name)).st_size
        for root, _, files in os.walk(SAMPLES)
        for name in files
    )
    assert apparent < used < MAX_BYTES, (apparent, used)
