"""User-facing messages say what happened in the user's terms, and what to do.

Each case runs the real CLI on a copy of a real sample checkpoint; "purged" copies lose their
old state files the way Spark's maintenance deletes them (everything before a kept snapshot).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from stateglass.app.browse.diff import compute_diff
from stateglass.app.browse.store import PartitionCache
from stateglass.app.browse.table import PageRequest, read_page
from stateglass.app.cli import build_parser
from stateglass.app.cli import main as cli
from stateglass.collectors.checkpoints.state_views import StateView
from stateglass.collectors.errors import MissingVersion
from tests.conftest import SAMPLES

AGG_HDFS = SAMPLES / "spark-4.3" / "agg-hdfs"
AGG_ROCKS_CL = SAMPLES / "spark-4.3" / "agg-rocks-cl"
VERSION = re.compile(r"^(\d+)\.(delta|snapshot|zip|changelog)$")


def _purged(src: Path, tmp_path: Path, keep_from: int) -> Path:
    """A copy whose state files before version ``keep_from`` are gone, as after maintenance."""
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    for path in (dst / "state").rglob("*"):
        m = VERSION.match(path.name)
        if m and int(m.group(1)) < keep_from:
            path.unlink()
    return dst


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli(list(argv)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("sample", [AGG_HDFS, AGG_ROCKS_CL], ids=["hdfs", "rocks-cl"])
def test_uncommitted_batch_names_the_last_committed(
    sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = tmp_path / "cp"
    shutil.copytree(sample, cp)
    line = _error(capsys, "state", str(cp), "--batch-id", "999")
    assert "batch 999 is not committed; the last committed batch is 11" in line
    line = _error(capsys, "changes", str(cp), "--from", "0", "--to", "999")
    assert "batch 999 is not committed; the last committed batch is 11" in line


@pytest.mark.parametrize(
    ("sample", "keep_from"), [(AGG_HDFS, 6), (AGG_ROCKS_CL, 6)], ids=["hdfs", "rocks-cl"]
)
def test_purged_batch_names_the_oldest_readable(
    sample: Path, keep_from: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = _purged(sample, tmp_path, keep_from)
    oldest = keep_from - 1  # version 6 (a snapshot) is batch 5
    line = _error(capsys, "state", str(cp), "--batch-id", "2")
    assert (
        f"the state of batch 2 was purged by Spark; the oldest readable batch is {oldest}" in line
    )
    line = _error(capsys, "changes", str(cp), "--from", "1", "--to", "8")
    assert (
        f"the state of batch 1 was purged by Spark; the oldest readable batch is {oldest}" in line
    )
    # The oldest readable batch does read.
    assert cli(["state", str(cp), "--batch-id", str(oldest), "--format", "jsonl"]) == 0


def _arguments(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _arguments(sub, sub_name)
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield name, action


def test_every_argument_has_help_and_states_its_default() -> None:
    undocumented = []
    for command, action in _arguments(build_parser(), "stateglass"):
        label = f"{command} {'/'.join(action.option_strings) or action.dest}"
        text = action.help or ""
        if not text or text == argparse.SUPPRESS:
            undocumented.append(f"{label}: no help")
            continue
        # Flags (store_true/false, counters) default to "off"; a value default must be said.
        has_value_default = action.const is None and action.default not in (None, False, [], ())
        if has_value_default and action.nargs != 0 and "default" not in text.lower():
            undocumented.append(f"{label}: default {action.default!r} not stated")
    assert undocumented == []


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"stateglass {version('stateglass')}"


def test_table_format_keeps_the_window_end(capsys: pytest.CaptureFixture[str]) -> None:
    cp = SAMPLES / "spark-4.3" / "window-progress"
    assert cli(["state", str(cp), "--format", "table"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "partition_id",
        "key.window.start",
        "key.window.end",
        "key.key",
        "value.count",
    ]
    first = lines[2].split()
    assert first[1] < first[2] and first[2].endswith("Z") and "…" not in lines[2]
    assert cli(["state", str(cp), "--format", "jsonl"]) == 0
    ends = {
        json.loads(line)["key"]["window"]["end"] for line in capsys.readouterr().out.splitlines()
    }
    assert first[2] in ends


def test_an_inferred_operator_name_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["info", str(SAMPLES / "spark-3.5" / "agg-hdfs")]) == 0
    out = capsys.readouterr().out
    assert "operator 0 stateStoreSave (inferred)" in out and "?" not in out
    assert "Spark 3.x writes no operator metadata" in out
    assert cli(["info", str(SAMPLES / "spark-4.3" / "agg-hdfs")]) == 0
    assert "(inferred)" not in capsys.readouterr().out


def test_browse_diff_and_history_say_purged_too(tmp_path: Path) -> None:
    view = StateView(str(_purged(AGG_HDFS, tmp_path, 6)))
    wanted = "the state of batch 2 was purged by Spark; the oldest readable batch is 5"
    with pytest.raises(MissingVersion, match=wanted):
        read_page(PageRequest(view, 3), cache=PartitionCache(), jobs=1)
    with pytest.raises(MissingVersion, match=wanted):
        compute_diff(view, 3, 8, cache=PartitionCache(), jobs=1)


def test_every_path_inside_a_checkpoint_is_refused_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--db``, ``-o`` and ``--progress``, on every command that takes them: one error."""
    cp = tmp_path / "cp"
    shutil.copytree(AGG_HDFS, cp)
    db = tmp_path / "sg.duckdb"
    assert cli(["collect", str(cp), "--db", str(db)]) == 0
    capsys.readouterr()
    inner = cp / "state" / "0"
    report = str(tmp_path / "report.md")
    cases = [
        ("--db", "sg.duckdb", ["collect", str(cp), "--db"]),
        ("--db", "sg.duckdb", ["check", str(cp), "--db"]),
        ("--db", "sg.duckdb", ["report", str(cp), "-o", report, "--db"]),
        ("-o", "report.md", ["report", str(cp), "--db", str(db), "-o"]),
        ("-o", "rows.csv", ["export", "--db", str(db), "--table", "batches", "-o"]),
        ("-o", "rows.jsonl", ["state", str(cp), "-o"]),
        ("-o", "rows.jsonl", ["changes", str(cp), "--from", "0", "--to", "1", "-o"]),
        ("--progress", "logs", ["collect", str(cp), "--db", str(db), "--progress"]),
    ]
    for option, name, argv in cases:
        path = str(inner / name)
        line = _error(capsys, *argv, path)
        assert line == (
            f"stateglass: error: {path}: is inside the checkpoint {cp}; {option} takes a path "
            "outside every checkpoint (StateGlass never writes into one, nor reads event logs "
            "from one)"
        ), argv
        assert not (inner / name).exists()
