"""``stateglass rewrite --batch-id B`` to an older batch (a rollback), without Spark: the plan
(which sources replay, what the sink does), the refusal of a batch that is not retained, and
the file source's log cut at its own batch. Spark judges the restart in
tests/rewrite/test_rollback_spark.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.rewrite.source_logs import (
    compact_interval,
    cut_file_log,
    source_log_files,
)
from stateglass.parsers.logs import CONF_SHUFFLE_PARTITIONS
from tests.conftest import copy_checkpoint

AGG = Path(__file__).parents[2] / "sample_checkpoints" / "spark-4.3" / "agg-hdfs"  # 0-11


def _rewrite(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["rewrite", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_plan_of_a_rollback_says_what_replays_and_what_the_sink_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _rewrite(capsys, str(AGG), str(tmp_path / "dst"), "--batch-id", "5")
    assert status == 0, out
    assert "batches 6..11 are undone" in out and "runs batch 6" in out
    # agg-hdfs read one file per batch: log batches 6..11 hold 6 files.
    assert "sources/0 (file): replays: its log is cut after its log batch 5; the 6 files" in out
    assert "file sink: its _spark_metadata already has batch ids 6..11, so it skips them" in out
    assert "foreachBatch (and other sinks): batch ids 6..11 are delivered again" in out
    assert not (tmp_path / "dst").exists()


def test_a_batch_whose_state_is_purged_is_refused_naming_the_oldest_whole_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = copy_checkpoint(AGG, tmp_path / "src")
    for part in (src / "state" / "0").glob("[0-9]*"):  # as retention purges versions 1-5
        for name in ("1.delta", "2.delta", "3.delta", "3.snapshot", "4.delta", "5.delta"):
            (part / name).unlink()
    status, _, err = _rewrite(capsys, str(src), str(tmp_path / "dst"), "--batch-id", "3")
    assert status == 2 and err.count("\n") == 1
    assert "batch 3 is not retained" in err
    assert "the oldest batch whose state is whole is 5 (--batch-id 5)" in err
    assert not (tmp_path / "dst").exists()
    (src / "offsets" / "4").unlink()  # Spark reads offsets/B-1 to restart after B
    status, _, err = _rewrite(capsys, str(src), str(tmp_path / "dst"), "--batch-id", "5")
    assert status == 2 and "offsets/4 is gone" in err and "is 6 (--batch-id 6)" in err


def test_apply_ends_the_destination_at_the_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "dst"
    status, out, _ = _rewrite(capsys, str(AGG), str(dst), "--batch-id", "5", "--apply")
    assert status == 0, out
    for log in ("offsets", "commits"):
        assert sorted(int(p.name) for p in (dst / log).iterdir()) == list(range(6))
    assert sorted(p.name for p in (dst / "sources" / "0").iterdir()) == [str(b) for b in range(6)]
    state = {p.name for p in (dst / "state").rglob("*") if p.is_file() and p.name[0].isdigit()}
    assert state == {"6.snapshot"}
    pinned = json.loads((dst / "offsets" / "5").read_text().split("\n")[1])["conf"]
    assert pinned[CONF_SHUFFLE_PARTITIONS] == "4"


def test_the_file_source_log_is_cut_at_its_own_batch_not_the_querys(tmp_path: Path) -> None:
    """A batch that read no new file leaves the source's log where it was: offsets/B names
    the log batch to cut at."""
    src = copy_checkpoint(AGG, tmp_path / "src")
    for batch in (6, 7):  # as if batches 6 and 7 read nothing new: both stand at log batch 5
        path = src / "offsets" / str(batch)
        lines = path.read_text().split("\n")
        path.write_text("\n".join([*lines[:2], '{"logOffset":5}']))
    kept = {rel[-1] for rel, _ in source_log_files(Checkpoint.open(str(src)), 7)}
    assert kept == {str(b) for b in range(6)}


def test_a_log_missing_files_is_cut_into_one_compact_file_of_the_entries_up_to_it(
    tmp_path: Path,
) -> None:
    """With log files 0-8 gone and 9.compact left, cutting at 5 writes 5.compact: the lines
    Spark wrote in files 0-5, in order (Spark restarts on such a cut in
    tests/rewrite/test_rollback_spark.py)."""
    log = AGG / "sources" / "0"
    files = {p.name: str(p) for p in log.iterdir() if not p.name.startswith(".")}
    left = {name: path for name, path in files.items() if name in {"9.compact", "10", "11"}}
    kept = cut_file_log(left, 5, lambda path: Path(path).read_bytes())
    assert set(kept) == {"5.compact"}
    entries = [(log / str(b)).read_text().split("\n")[1:] for b in range(6)]
    assert kept["5.compact"].decode() == "\n".join(["v1", *(e for batch in entries for e in batch)])


def test_a_compact_file_after_the_cut_is_not_copied() -> None:
    log = AGG / "sources" / "0"
    files = {p.name: str(p) for p in log.iterdir() if not p.name.startswith(".")}
    kept = cut_file_log(files, 10, lambda path: Path(path).read_bytes())
    assert set(kept) == {*(str(b) for b in range(9)), "9.compact", "10"}


@pytest.mark.parametrize(
    ("compacts", "default", "interval"),
    [([], 10, 10), ([9, 19], 10, 10), ([11], 5, 6), ([11], 12, 12), ([5], 10, 6), ([9], 2, 2)],
)
def test_the_compact_interval_is_derived_as_spark_derives_it(
    compacts: list[int], default: int, interval: int
) -> None:
    # CompactibleFileStreamLog.compactInterval and its example: 11.compact, default 5 -> 6.
    assert compact_interval(compacts, default) == interval
