"""Listing leaves out Spark's hidden sidecars (``.N.delta.crc``, temp files)."""

from __future__ import annotations

from pathlib import Path

from stateglass.collectors.fs import LOCAL


def test_hidden_entries_are_left_out(tmp_path: Path) -> None:
    for name in ("1.delta", ".1.delta.crc", ".2.delta.3f9a.tmp", "_metadata"):
        (tmp_path / name).write_bytes(b"x")
    assert sorted(f.name for f in LOCAL.list(str(tmp_path))) == ["1.delta", "_metadata"]
