"""Pure pieces of the scan: diffing listings, classifying files, byte counts, set semantics."""

from __future__ import annotations

from pathlib import Path

import pytest

from stateglass.collectors.checkpoints.listing import (
    FileStat,
    StateFile,
    classify,
    diff_files,
    is_temporary,
    version_file_stats,
)
from stateglass.collectors.stores.keysets import apply_changes
from stateglass.collectors.watch.events import Debouncer, checkpoint_of, is_whole


def test_diff_by_path_size_and_mtime() -> None:
    known = {"a": (1, 1.0), "b": (2, 2.0), "c": (3, 3.0)}
    current = {"a": (1, 1.0), "b": (2, 2.5), "d": (4, 4.0)}
    diff = diff_files(known, current)
    assert diff.added == {"d"}
    assert diff.changed == {"b"}
    assert diff.removed == {"c"}
    assert diff.touched == {"b", "d"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("12.delta", (12, "delta"), id="delta"),
        pytest.param("3.snapshot", (3, "snapshot"), id="snapshot"),
        pytest.param("4.zip", (4, "zip"), id="zip"),
        pytest.param("5_0f3a.changelog", (5, "changelog"), id="changelog-v2"),
        pytest.param(".5.delta.crc", None, id="crc"),
        pytest.param(".5.delta.3c1e.tmp", None, id="tmp"),
        pytest.param("_temporary", None, id="temporary"),
        pytest.param("schema", None, id="other"),
    ],
)
def test_classify(name: str, expected: tuple[int, str] | None) -> None:
    assert classify(name) == expected


def test_temporary_names() -> None:
    assert is_temporary(".1.delta.tmp") and is_temporary("1.delta.crc")
    assert is_temporary("_temporary") and not is_temporary("1.delta")
    assert not is_whole("cp/state/0/0/.1.delta.abc.tmp")
    assert not is_whole("cp/_temporary/0/part")
    assert is_whole("cp/state/0/0/1.delta")


def _f(version: int, kind: str, size: int) -> StateFile:
    return StateFile(FileStat(f"{version}.{kind}", size, 0.0), 0, "default", 0, version, kind)


def test_version_file_stats_replay_from_newest_snapshot() -> None:
    files = [_f(1, "delta", 10), _f(2, "delta", 20), _f(2, "snapshot", 100), _f(3, "delta", 30)]
    stats = version_file_stats(files, [1, 2, 3], {})
    assert (stats[1].versions_since_snapshot, stats[1].replay_bytes) == (1, 10)
    assert (stats[2].delta_bytes, stats[2].snapshot_bytes) == (20, 100)
    assert (stats[2].versions_since_snapshot, stats[2].replay_bytes) == (0, 100)
    assert (stats[3].versions_since_snapshot, stats[3].replay_bytes) == (1, 130)


def test_version_file_stats_counts_live_ssts_of_the_zip() -> None:
    files = [_f(2, "zip", 50), _f(3, "changelog", 5)]
    stats = version_file_stats(files, [3], {2: 1000})
    assert stats[3].replay_bytes == 1055


def test_apply_changes_set_semantics() -> None:
    keys = {b"a", b"b"}
    changes = [
        ("update", b"a", b"1"),  # present: updated
        ("update", b"c", b"1"),  # absent: added
        ("delete", b"b", None),  # present: removed
        ("delete", b"zz", None),  # absent: nothing
        ("append", b"d", b"x"),  # list merge of an absent key: added
        ("append", b"d", b"y"),  # then present: updated
    ]
    assert apply_changes(keys, changes) == (2, 2, 1)  # type: ignore[arg-type]
    assert keys == {b"a", b"c", b"d"}


def test_debouncer_waits_for_quiet() -> None:
    d = Debouncer(delay_s=1.0, max_wait_s=5.0)
    d.add("cp", 0.0)
    d.add("cp", 0.5)
    assert d.pop_due(1.2) == []
    assert d.pop_due(1.5) == ["cp"]
    assert len(d) == 0


def test_debouncer_releases_a_busy_key_after_max_wait() -> None:
    d = Debouncer(delay_s=1.0, max_wait_s=3.0)
    for t in (0.0, 0.8, 1.6, 2.4, 3.0):
        d.add("cp", t)
    assert d.pop_due(3.1) == ["cp"]


def test_checkpoint_of() -> None:
    roots = ["/data/a", "/data/ab"]
    assert checkpoint_of("/data/ab/state/0/0/1.delta", roots) == "/data/ab"
    assert checkpoint_of("/data/a/offsets/3", roots) == "/data/a"
    assert checkpoint_of("/elsewhere/x", roots) is None


def test_a_file_is_judged_by_its_hadoop_sidecar_only_when_it_has_one(tmp_path: Path) -> None:
    from stateglass.collectors.fs import LOCAL
    from stateglass.collectors.scan.checksums import verify_files
    from tests.collectors.test_watch_scale import hadoop_crc

    data = bytes(range(256)) * 5
    good, flipped, bare = (tmp_path / n for n in ("1.delta", "2.delta", "3.delta"))
    for f in (good, flipped, bare):
        f.write_bytes(data)
        if f is not bare:
            f.with_name(f".{f.name}.crc").write_bytes(hadoop_crc(data))
    flipped.write_bytes(data[:700] + bytes([data[700] ^ 1]) + data[701:])
    found = verify_files(LOCAL, {str(f): len(data) for f in (good, flipped, bare)})
    assert found == [
        (str(flipped), "does not match .2.delta.crc: CRC-32 of bytes 512..1023 differs")
    ]
