"""Browse and Diff on a live job: follow the newest batch unless a version is pinned.

The "live job" is a copy of the real ``agg-hdfs`` sample (12 batches) with batches 8..11 held
back (their offsets, commits and state files moved aside), collected; then the held-back
files are moved in, as Spark would write them, and the copy is collected again.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app.dashboard import state_ui
from stateglass.app.dashboard.context import DB_ENV
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES

TIMEOUT_S = 60
HELD_BACK = range(8, 12)  # batch ids; state versions 9..12


class LiveCopy:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.cp = root / "cp"
        self.aside = root / "aside"
        self.db = Database(str(root / "live.duckdb"))
        shutil.copytree(SAMPLES / "spark-4.3" / "agg-hdfs", self.cp)
        for path in self._held_back():
            target = self.aside / path.relative_to(self.cp)
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        scan_checkpoint(self.db, str(self.cp))

    def _held_back(self) -> list[Path]:
        paths = [self.cp / log / str(b) for log in ("offsets", "commits") for b in HELD_BACK]
        versions = {str(b + 1) for b in HELD_BACK}
        paths += [p for p in self.cp.glob("state/*/*/*") if p.name.split(".")[0] in versions]
        return paths

    def release(self) -> None:
        """The held-back batches commit: their files appear, and the copy is collected."""
        for path in sorted(self.aside.rglob("*")):
            if path.is_file():
                path.rename(self.cp / path.relative_to(self.aside))
        scan_checkpoint(self.db, str(self.cp))
        # Retained versions are cached for a few seconds; the test does not wait them out.
        state_ui._versions.clear()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveCopy]:
    copy = LiveCopy(tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DB_ENV, copy.db.path)
        yield copy


def _page(name: str) -> None:
    import importlib

    importlib.import_module(f"stateglass.app.dashboard.views.{name}").render()


def _open(name: str, live: LiveCopy) -> AppTest:
    at = AppTest.from_function(_page, args=(name,), default_timeout=TIMEOUT_S)
    at.run()
    at.sidebar.selectbox(key="sg_checkpoint_widget").select(str(live.cp)).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _captions(at: AppTest) -> str:
    return " ".join(str(c.value) for c in at.caption)


def test_browse_follows_the_newest_batch(live: LiveCopy) -> None:
    at = _open("browse", live)
    assert at.select_slider[0].value == 8
    assert "Showing the newest committed batch 7 · version 8" in _captions(at)
    live.release()
    at.run()
    assert not at.exception
    assert at.select_slider[0].value == 12
    assert "newest committed batch 11 · version 12" in _captions(at)
    assert "(pinned)" not in _captions(at)  # the tmp path holds the word too


def test_browse_pinned_says_how_many_are_newer(live: LiveCopy) -> None:
    at = _open("browse", live)
    at.select_slider[0].set_value(6).run()
    assert "batch 5 · version 6 (pinned) · 2 newer batches" in _captions(at)
    live.release()
    at.run()
    assert not at.exception
    assert at.select_slider[0].value == 6
    assert "batch 5 · version 6 (pinned) · 6 newer batches" in _captions(at)
    at.button(key=f"{at.select_slider[0].key.split('#')[0]}:show_newest").click().run()
    assert at.select_slider[0].value == 12
    assert "(pinned)" not in _captions(at)  # the tmp path holds the word too


def test_diff_follows_unless_pinned(live: LiveCopy) -> None:
    at = _open("diff", live)
    assert tuple(at.select_slider[0].value) == (7, 8)
    live.release()
    at.run()
    assert not at.exception
    assert tuple(at.select_slider[0].value) == (11, 12)
    at.select_slider[0].set_range(3, 6).run()
    assert "batch 5 · version 6 (pinned) · 6 newer batches" in _captions(at)
