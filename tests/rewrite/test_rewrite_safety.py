"""``stateglass rewrite``'s refusals and faults: one line, exit 2, nothing at DST, SRC unread
but for reading; and what an applied rewrite writes, read back with StateGlass's readers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

import pytest

from stateglass.app.cli import main
from stateglass.app.commands import rewrite as rewrite_command
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.rewrite import WRITERS
from stateglass.collectors.rewrite.base import WriteTarget
from stateglass.collectors.rewrite.hdfs import HdfsStoreWriter
from stateglass.parsers.partitioning import row_partition
from tests.collectors.helpers import tree_digest
from tests.conftest import copy_checkpoint

SAMPLES = Path(__file__).parents[2] / "sample_checkpoints" / "spark-4.3"
AGG = SAMPLES / "agg-hdfs"  # 4 partitions, batches 0-11


def _rewrite(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["rewrite", *args])
    out, err = capsys.readouterr()
    return status, out, err


def _state(root: Path, batch: int) -> dict[int, Counter[tuple[bytes, bytes]]]:
    """Rows per partition of operator 0's default store at ``batch``, by our reader."""
    cp = Checkpoint.open(str(root))
    source = StateSource(cp, StateRequest(0, "default", batch_id=batch))
    return {p: Counter(source.load(p, batch + 1)) for p in source.partitions}


def _nothing_at(dst: Path) -> bool:
    siblings = [p for p in dst.parent.iterdir() if p.name.startswith(f".{dst.name}")]
    return not dst.exists() and not siblings


def test_a_dry_run_prints_the_plan_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _rewrite(capsys, str(AGG), str(tmp_path / "dst"), "--partitions", "3")
    assert status == 0
    assert "4 → 3 partitions" in out and "spark.sql.shuffle.partitions: 4 → 3" in out
    assert "numPartitions 4 → 3" in out and "dry run" in out
    assert _nothing_at(tmp_path / "dst")


@pytest.fixture(params=["serial", "forked"])
def workers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Partitions written in this process, or (a store of any size) in two forked workers."""
    if request.param == "forked":
        monkeypatch.setattr(rewrite_command, "PARALLEL_ROWS", 0)
        monkeypatch.setattr(rewrite_command.os, "cpu_count", lambda: 2)
    return str(request.param)


@pytest.mark.parametrize("n", [2, 7], ids=["down", "up"])
def test_apply_writes_each_key_where_sparks_hash_sends_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], n: int, workers: str
) -> None:
    src = copy_checkpoint(AGG, tmp_path / "src")
    before = tree_digest(src)
    dst = tmp_path / "dst"
    status, out, _ = _rewrite(capsys, str(src), str(dst), "--partitions", str(n), "--apply")
    assert status == 0, out
    assert tree_digest(src) == before
    written = _state(dst, 11)
    assert sorted(written) == list(range(n))
    assert sum(written.values(), Counter()) == sum(_state(src, 11).values(), Counter())
    cp = Checkpoint.open(str(dst))
    assert cp.offsets(11).shuffle_partitions == n and cp.offset_batch_ids[-1] == 11
    codec = StateSource(cp, StateRequest(0, "default", batch_id=11)).row_codec
    for partition, rows in written.items():
        for key, value in rows:
            row = codec.decode(key, value)[0][0]
            assert row_partition(codec.key_schema, tuple(row), n) == partition
    state_files = sorted(p.name for p in (dst / "state").rglob("*") if p.is_file())
    assert state_files == sorted(["metadata", "schema"] + ["12.snapshot"] * n)


def test_a_destination_that_is_not_empty_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "keep").write_text("mine")
    status, _, err = _rewrite(capsys, str(AGG), str(dst), "--partitions", "3", "--apply")
    assert status == 2
    assert err.count("\n") == 1 and "not empty" in err
    assert [p.name for p in dst.iterdir()] == ["keep"]


def test_a_batch_in_flight_is_refused_unless_a_committed_batch_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = copy_checkpoint(AGG, tmp_path / "src")
    (src / "commits" / "11").unlink()
    status, _, err = _rewrite(capsys, str(src), str(tmp_path / "dst"), "--apply")
    assert status == 2 and err.count("\n") == 1 and "in flight" in err
    assert _nothing_at(tmp_path / "dst")
    status, out, _ = _rewrite(
        capsys, str(src), str(tmp_path / "dst"), "--partitions", "2", "--batch-id", "10", "--apply"
    )
    assert status == 0, out
    assert sorted(p.name for p in (tmp_path / "dst" / "offsets").iterdir()) == [
        str(b) for b in sorted(range(11), key=str)
    ]
    assert (tmp_path / "dst" / "state" / "0" / "0" / "11.snapshot").exists()


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garble(path: Path) -> None:
    path.write_bytes(b"\x00not spark's" * 8)


def _make_a_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize(
    ("sample", "damaged", "damage", "batch"),
    [
        pytest.param("agg-hdfs", "state/0/1/12.snapshot", _truncate, "11", id="snapshot-cut"),
        pytest.param("agg-hdfs", "state/0/1/11.delta", _truncate, "10", id="delta-cut"),
        pytest.param("agg-rocks", "state/0/1/12.zip", _garble, "11", id="zip-corrupt"),
        pytest.param("agg-rocks-cl", "state/0/1/11.changelog", _truncate, "10", id="changelog-cut"),
        pytest.param(
            "agg-rocks-cl", "state/0/1/11.changelog", _make_a_directory, "10", id="changelog-dir"
        ),
        pytest.param("agg-hdfs", "metadata", _garble, "11", id="metadata"),
        pytest.param("agg-hdfs", "offsets/5", _garble, "11", id="old-offsets"),
    ],
)
def test_a_damaged_source_file_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sample: str,
    damaged: str,
    damage: Callable[[Path], None],
    batch: str,
) -> None:
    src = copy_checkpoint(SAMPLES / sample, tmp_path / "src")
    damage(src / damaged)
    before = tree_digest(src)
    status, _, err = _rewrite(
        capsys, str(src), str(tmp_path / "dst"), "--partitions", "3", "--batch-id", batch, "--apply"
    )
    assert status == 2 and err.count("\n") == 1
    # A state file is named by its path, or, where the rollback's retention check finds the
    # version cannot be loaded before anything is read, by its partition and version.
    parts = damaged.split("/")
    where = f"p{parts[2]}: version {parts[-1].split('.')[0]}" if parts[0] == "state" else damaged
    assert damaged in err or where in err, err
    assert _nothing_at(tmp_path / "dst")
    assert tree_digest(src) == before


def test_transform_with_state_to_hdfs_is_refused_as_spark_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "dst"
    status, out, err = _rewrite(
        capsys, str(SAMPLES / "tws-rocks-cl"), str(dst), "--provider", "hdfs", "--apply"
    )
    assert status == 2 and err.count("\n") == 1
    assert "STORE_BACKEND_NOT_SUPPORTED_FOR_TWS" in out
    assert _nothing_at(dst)


class DroppingWriter(HdfsStoreWriter):
    """Loses the last row of every partition: what the self-check is there to catch."""

    PROVIDER: ClassVar[str] = "hdfs"

    def write_partition(
        self, target: WriteTarget, rows: Iterable[tuple[bytes, bytes]]
    ) -> list[str]:
        return super().write_partition(target, list(rows)[:-1])


def test_a_destination_that_reads_back_wrong_is_removed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    workers: str,
) -> None:
    monkeypatch.setitem(WRITERS, "hdfs", DroppingWriter)
    status, _, err = _rewrite(
        capsys, str(AGG), str(tmp_path / "dst"), "--partitions", "3", "--apply"
    )
    assert status == 2 and err.count("\n") == 1 and "missing" in err
    assert _nothing_at(tmp_path / "dst")


class KilledWriter(HdfsStoreWriter):
    """A writer whose process dies at its first partition, as the kernel's OOM killer does."""

    def write_partition(
        self, target: WriteTarget, rows: Iterable[tuple[bytes, bytes]]
    ) -> list[str]:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("not reached")


def test_a_worker_killed_stops_the_rewrite_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rewrite_command, "PARALLEL_ROWS", 0)
    monkeypatch.setitem(WRITERS, "hdfs", KilledWriter)
    dst = tmp_path / "dst"
    status, _, err = _rewrite(
        capsys, str(AGG), str(dst), "--partitions", "3", "--apply", "--jobs", "2"
    )
    assert status == 2 and err.count("\n") == 1 and "killed by SIGKILL" in err, err
    assert _nothing_at(dst)


def test_workers_write_rocksdb_after_this_process_read_it(tmp_path: Path) -> None:
    """SRC's zips are opened here while planning; the workers then write RocksDB. Had they
    been forked after that, their databases would wait forever for background threads a
    fork does not carry: the run is a separate process, so a hang fails as a timeout."""
    run = (
        "import sys; from stateglass.app.commands import rewrite; rewrite.PARALLEL_ROWS = 0; "
        "from stateglass.app.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    dst = tmp_path / "dst"
    args = ["rewrite", str(SAMPLES / "agg-rocks"), str(dst), "--partitions", "3", "--apply"]
    done = subprocess.run(
        [sys.executable, "-c", run, *args, "--jobs", "2"], capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (dst / "state" / "0").iterdir()) == ["0", "1", "2", "_metadata"]


def test_a_destination_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    dst = tmp_path / "a-file" / "dst"
    status, _, err = _rewrite(capsys, str(AGG), str(dst), "--partitions", "3", "--apply")
    assert status == 2 and err.count("\n") == 1 and "cannot write" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
