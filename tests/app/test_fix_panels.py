"""Plan a fix: a checkpoint that will not restart offers the roll-back to its newest whole
batch, as a ``stateglass rewrite`` command whose dry run plans it and writes nothing (on the
page too, on request); state that only grows gets a panel that says no rewrite stops it, and
offers to drop the keys nothing has touched since the oldest retained batch."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.app.dashboard.context import DB_ENV
from tests.app.test_pages_core import run_page
from tests.conftest import SAMPLES


def test_a_checkpoint_that_will_not_restart_offers_the_roll_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = tmp_path / "orders"
    shutil.copytree(SAMPLES / "spark-4.3" / "agg-hdfs", cp)
    last = max(int(p.name) for p in (cp / "commits").iterdir() if p.name.isdigit())
    # A restart after batch ``last`` loads version last + 1: without its files (delta and
    # snapshot), the newest whole batch is the one before.
    for version_file in (cp / "state" / "0" / "0").glob(f"{last + 1}.*"):
        version_file.unlink()
    db = tmp_path / "history.duckdb"
    main(["collect", str(cp), "--db", str(db)])
    monkeypatch.setenv(DB_ENV, str(db))

    at = run_page("health")
    assert at.error and "will not restart" in at.error[0].value
    (panel,) = [e for e in at.expander if e.label.startswith("Plan a fix")]
    assert panel.label == f"Plan a fix: Roll back to batch {last - 1}"
    (command,) = [c.value for c in panel.code]
    args = shlex.split(command)
    assert args[:3] == ["stateglass", "rewrite", str(cp)]
    assert args[4:] == ["--batch-id", str(last - 1)]

    capsys.readouterr()
    assert main(args[1:]) == 0
    out = capsys.readouterr().out
    assert f"state of batch {last - 1}" in out and "dry run: nothing written" in out
    assert not Path(args[3]).exists()

    # The panel's own dry run, asked for: the CLI's rollback lines, nothing written.
    (button,) = [b for b in at.button if b.label.startswith("Dry run here")]
    button.click().run()
    (panel,) = [e for e in at.expander if e.label.startswith("Plan a fix")]
    shown = [c.value for c in panel.code if "rollback:" in c.value]
    rollback = next(line for line in out.splitlines() if line.startswith("rollback:"))
    assert len(shown) == 1 and rollback in shown[0], shown
    assert not Path(args[3]).exists()


def test_state_that_only_grows_offers_to_drop_the_keys_idle_since_the_oldest_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo adds 200 sessions a batch and never sees one again: the 200 of batch 0, the
    oldest retained, are the same at the last batch, and the panel's rewrite drops them."""
    cp = SAMPLES / "demo" / "unbounded-state"
    db = tmp_path / "history.duckdb"
    main(["collect", str(cp), "--db", str(db)])
    monkeypatch.setenv(DB_ENV, str(db))

    at = run_page("health")
    (panel,) = [e for e in at.expander if e.label.startswith("Plan a fix: Remove the keys idle")]
    assert panel.label == "Plan a fix: Remove the keys idle since batch 0 from operator 0 / default"
    assert "No rewrite stops this" in panel.markdown[0].value
    (command,) = [c.value for c in panel.code]
    args = shlex.split(command)
    assert args[:3] == ["stateglass", "rewrite", str(cp)] and args[4:6] == [
        "--drop-keys",
        "0/default",
    ]
    assert "WHERE batch_id = 0)" in args[6]

    capsys.readouterr()
    assert main(args[1:]) == 0
    out = capsys.readouterr().out
    assert "edit 0/default: 200 of 2000 keys removed" in out and not Path(args[3]).exists()

    (button,) = [b for b in at.button if b.label.startswith("Dry run here")]
    button.click().run()
    (panel,) = [e for e in at.expander if e.label.startswith("Plan a fix: Remove the keys idle")]
    assert any("200 of 2000 keys removed" in c.value for c in panel.code)
    assert not Path(args[3]).exists()
