"""One ``--config`` file for every command: its ``[history]`` reaches every writer, and a
section no layer declares is refused by every command, in one line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.app.commands.dashboard import _collect_for_dashboard
from stateglass.app.settings import SECTIONS, Settings, load_settings
from stateglass.collectors.db.read import read_query
from tests.conftest import SAMPLES

SAMPLE = str(SAMPLES / "spark-4.3" / "agg-hdfs")
# A writer maintains after every scan, keeping roll-ups of 7 versions: the maintenance row
# says which settings it ran with.
HISTORY = "[history]\nmaintain_every = 1\nrollup_versions = 7\n"


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sg.toml"
    path.write_text(text)
    return str(path)


def _collect_by(command: str, db: str, config: str, tmp_path: Path) -> None:
    if command == "dashboard":
        _collect_for_dashboard([SAMPLE], db, argparse.Namespace(config=config))
        return
    extra = ["-o", str(tmp_path / "report.md")] if command == "report" else []
    status = main([command, SAMPLE, "--db", db, "--config", config, *extra])
    # check exits with the worst health status (0, 1 or 2); the others with 0.
    assert status in ((0, 1, 2) if command == "check" else (0,))


@pytest.mark.parametrize("command", ["collect", "check", "report", "dashboard"])
def test_every_writer_keeps_the_history_the_config_says(tmp_path: Path, command: str) -> None:
    db = str(tmp_path / "sg.duckdb")
    _collect_by(command, db, _config(tmp_path, HISTORY), tmp_path)
    assert read_query(db, "SELECT rollup_versions FROM history_maintenance") == [(7,)]


@pytest.mark.parametrize("command", ["collect", "check", "info"])
def test_an_unknown_section_is_one_line_whatever_the_command(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, "[stalled]\nwarn_factor = 3\n")
    extra = [] if command == "info" else ["--db", str(tmp_path / "sg.duckdb")]
    assert main([command, SAMPLE, "--config", config, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{config}: unknown section [stalled]" in err
    assert not (tmp_path / "sg.duckdb").exists()


def test_each_section_is_declared_once_and_read_into_its_layer(tmp_path: Path) -> None:
    names = [name for section in SECTIONS for name in section.names]
    assert len(names) == len(set(names))
    assert {"storage", "history", "limits", "spark", "stalled_query"} <= set(names)
    settings = load_settings(
        _config(
            tmp_path,
            HISTORY + "[storage]\ncache_size = '1MiB'\n[limits]\nmax_ratio = 9\n"
            "[stalled_query]\nenabled = false\n",
        )
    )
    assert settings.history.rollup_versions == 7
    assert settings.storage.cache_bytes == 1 << 20
    assert settings.health.limits.max_ratio == 9
    assert not settings.health.enabled("stalled_query")
    assert load_settings(None) == Settings()
