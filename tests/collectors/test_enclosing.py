"""One answer to "is this path inside a checkpoint?": known roots, symlinks, and the layout
of checkpoints nobody named (the remote case is in tests/remote/test_enclosing.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stateglass.collectors.checkpoints.enclosing import enclosing_checkpoint
from tests.conftest import SAMPLES

AGG = SAMPLES / "spark-4.3" / "agg-hdfs"


@pytest.mark.parametrize(
    "inside",
    [
        pytest.param("", id="the-root"),
        pytest.param("offsets/0", id="a-log-file"),
        pytest.param("state/0/0/1.delta", id="a-state-file"),
        pytest.param("state/0/new/out.parquet", id="a-file-not-there-yet"),
    ],
)
def test_found_by_its_layout(inside: str) -> None:
    assert enclosing_checkpoint(str(AGG / inside)) == str(AGG)


def test_beside_or_above_a_checkpoint_is_outside(tmp_path: Path) -> None:
    assert enclosing_checkpoint(str(AGG.parent)) is None
    assert enclosing_checkpoint(str(AGG.parent / "out.jsonl")) is None
    assert enclosing_checkpoint(str(tmp_path / "sg.duckdb"), known=[str(AGG)]) is None


def test_a_known_root_matches_through_symlinks_and_by_whole_names(tmp_path: Path) -> None:
    root = tmp_path / "cp"
    (root / "sub").mkdir(parents=True)  # no checkpoint layout: only the known root says so
    link = tmp_path / "link"
    link.symlink_to(root)
    assert enclosing_checkpoint(str(link / "sub" / "out.md"), known=[str(root)]) == str(root)
    assert enclosing_checkpoint(str(root / "out.md"), known=[str(link)]) == str(link)
    twin = tmp_path / "cp2"
    twin.mkdir()
    assert enclosing_checkpoint(str(twin / "out.md"), known=[str(root)]) is None
    assert enclosing_checkpoint(str(twin / "out.md"), known=["s3://bucket/cp2"]) is None


def test_a_symlink_into_an_unnamed_checkpoint_is_followed(tmp_path: Path) -> None:
    link = tmp_path / "looks-harmless"
    link.symlink_to(AGG / "state")
    assert enclosing_checkpoint(str(link / "out.jsonl")) == str(AGG)


def test_a_checkpoint_whose_logs_are_gone_is_still_one(tmp_path: Path) -> None:
    cp = tmp_path / "cp"
    shutil.copytree(AGG, cp, ignore=shutil.ignore_patterns("offsets", "commits"))
    assert enclosing_checkpoint(str(cp / "state" / "out.jsonl")) == str(cp)
    shutil.rmtree(cp / "state")  # a metadata file alone is anybody's
    assert enclosing_checkpoint(str(cp / "out.jsonl")) is None


def test_a_folder_named_like_a_log_file_does_not_count(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text("{}")
    (tmp_path / "commits").write_text("not a directory")
    assert enclosing_checkpoint(str(tmp_path / "out.jsonl")) is None
    (tmp_path / "offsets").mkdir()
    assert enclosing_checkpoint(str(tmp_path / "out.jsonl")) == str(tmp_path)


def test_a_project_with_a_commits_folder_is_not_a_checkpoint(tmp_path: Path) -> None:
    """A repository's ``commits/`` or a report folder's ``offsets/`` is not Spark's: without
    the ``metadata`` Spark writes first, ``-o`` and ``--db`` may go there."""
    project = tmp_path / "proj"
    (project / "commits").mkdir(parents=True)
    (project / "offsets").mkdir()
    (project / "reports").mkdir()
    assert enclosing_checkpoint(str(project / "reports" / "out.jsonl")) is None
