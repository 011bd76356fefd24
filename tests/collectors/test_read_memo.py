"""The scan's file reads: whole files through file descriptors, and the memo that hands the
chain counting's bytes to the eviction audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.fs import LOCAL
from stateglass.collectors.scan.read_memo import ReadMemo


def test_local_read_returns_every_byte(tmp_path: Path) -> None:
    empty, small, big = tmp_path / "empty", tmp_path / "small", tmp_path / "big"
    empty.write_bytes(b"")
    small.write_bytes(b"\x00\x01delta")
    big.write_bytes(bytes(range(256)) * 20_000)
    for path in (empty, small, big):
        assert LOCAL.read(str(path)) == path.read_bytes()
    # A file whose size the kernel does not know reads to its end all the same.
    assert LOCAL.read("/proc/self/cmdline") == Path("/proc/self/cmdline").read_bytes()


def test_local_read_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="is a directory"):
        LOCAL.read(str(tmp_path))
    with pytest.raises(CheckpointError, match="disappeared"):
        LOCAL.read(str(tmp_path / "gone"))


def test_memo_serves_a_remembered_file_once(tmp_path: Path) -> None:
    path = tmp_path / "1.delta"
    path.write_bytes(b"counted")
    reads = ReadMemo(LOCAL)
    assert reads.read(str(path)) == b"counted"
    reads.stop()
    path.write_bytes(b"changed")
    # The audit sees the bytes the counting saw, then the memo forgets them.
    assert reads.read(str(path)) == b"counted"
    assert reads.read(str(path)) == b"changed"
    assert reads.read(str(path)) == b"changed"  # stopped: nothing more is kept


def test_memo_keeps_only_what_its_budget_allows(tmp_path: Path) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"x" * 10)
    big.write_bytes(b"y" * 100)
    reads = ReadMemo(LOCAL, budget=50)
    reads.read(str(big))
    reads.read(str(small))
    assert set(reads.kept) == {str(small)}
    reads.clear()
    assert reads.kept == {}
    reads.read(str(small))
    assert reads.kept == {}
