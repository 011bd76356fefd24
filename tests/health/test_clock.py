"""The one clock rule: file times trusted while they follow Spark's batch times, on real
checkpoints of every Spark version, on copies of them, and as properties of the pure rule."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stateglass.app.analysis.clock import JITTER_S, SKEW_S, BatchTimes, judge_file_times
from tests.conftest import ROOT

CORPUS = Path("/work/shared/fixtures/spark-checkpoints.tar.gz")
START_MS = 1_704_067_200_000  # 2024-01-01

# Increasing batch times: gaps of 0.1 s to an hour, as triggers give them.
gaps = st.lists(st.integers(100, 3_600_000), min_size=1, max_size=60)


def _batch_times(gap_ms: list[int]) -> list[int]:
    out, ts = [], START_MS
    for gap in gap_ms:
        ts += gap
        out.append(ts)
    return out


@given(
    gaps,
    st.floats(-SKEW_S / 2, SKEW_S / 2),
    st.data(),
)
def test_files_spark_wrote_are_trusted(gap_ms: list[int], skew: float, data: st.DataObject) -> None:
    """Offsets written within a jitter after the batch time (on a skewed storage clock), each
    commit after its offsets: trusted, however far apart the batches."""
    rows: list[BatchTimes] = []
    for ts in _batch_times(gap_ms):
        offsets = ts / 1000 + skew + data.draw(st.floats(0, JITTER_S / 2))
        commit = data.draw(st.one_of(st.none(), st.floats(offsets, offsets + 3600)))
        rows.append((ts, offsets, commit))
    assert judge_file_times(rows).trusted
    assert judge_file_times(rows[::-1]).trusted  # order does not matter


@given(gaps, st.floats(0, 3 * 86400), st.floats(0, 2.0))
def test_files_copied_at_once_are_not_trusted(
    gap_ms: list[int], after_s: float, copy_s: float
) -> None:
    """Every file written during one copy, ``after_s`` after the last batch: not trusted
    once the batches span more than two jitters or the copy came later than the skew allows."""
    times = _batch_times(gap_ms)
    copied_at = times[-1] / 1000 + after_s
    rows: list[BatchTimes] = [
        (ts, copied_at + copy_s * i / len(times), copied_at + copy_s) for i, ts in enumerate(times)
    ]
    span = (times[-1] - times[0]) / 1000
    verdict = judge_file_times(rows)
    if span > 2 * (JITTER_S + copy_s) or after_s > SKEW_S + span:
        assert not verdict.trusted and verdict.why
        assert verdict.note.startswith("file times look copied and are not used: ")
    if span < JITTER_S / 2 and after_s < SKEW_S / 2:
        assert verdict.trusted  # a copy made at once of a short run is what Spark writes


@given(gaps, st.floats(JITTER_S + 1, 3600))
def test_a_commit_older_than_its_offsets_is_not_trusted(gap_ms: list[int], early: float) -> None:
    times = _batch_times(gap_ms)
    rows: list[BatchTimes] = [(ts, ts / 1000, ts / 1000 + 1) for ts in times]
    last = times[-1]
    rows[-1] = (last, last / 1000, last / 1000 - early)
    assert not judge_file_times(rows).trusted


def test_no_batch_times_is_trusted() -> None:
    assert judge_file_times([]).trusted
    assert judge_file_times([(None, 5.0, 6.0), (0, 1.0, None)]).trusted


def _rows(cp: Path) -> list[BatchTimes]:
    rows: list[BatchTimes] = []
    for f in (cp / "offsets").iterdir():
        if not f.name.isdigit():
            continue
        meta = json.loads(f.read_text().split("\n")[1])
        commit = cp / "commits" / f.name
        done = commit.stat().st_mtime if commit.exists() else None
        rows.append((meta.get("batchTimestampMs"), f.stat().st_mtime, done))
    return rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    if not CORPUS.exists():
        pytest.skip(f"{CORPUS} is not on this machine")
    out = tmp_path_factory.mktemp("corpus")
    with tarfile.open(CORPUS) as tar:
        tar.extractall(out, filter="data")  # file times as Spark wrote them
    return sorted(p.parent for p in out.glob("out/*/*/checkpoint/offsets"))


def test_real_checkpoints_of_every_version_are_trusted_and_their_copies_not(
    corpus: list[Path], tmp_path: Path
) -> None:
    assert len(corpus) > 60
    for cp in corpus:
        assert judge_file_times(_rows(cp)).trusted, cp
    # A copy with the files' times of now (what cp -r or aws s3 cp gives).
    for cp in corpus[:10]:
        copy = tmp_path / cp.parent.parent.name / cp.parent.name
        shutil.copytree(cp, copy)
        now = time.time()
        for f in copy.rglob("*"):
            os.utime(f, (now, now))
        assert not judge_file_times(_rows(copy)).trusted, cp


def test_samples_cloned_from_git_are_not_trusted() -> None:
    """A git checkout writes every file when it is cloned, long after Spark ran the query."""
    cp = ROOT / "sample_checkpoints" / "spark-4.3" / "agg-hdfs"
    assert not judge_file_times(_rows(cp)).trusted
