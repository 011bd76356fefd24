"""Every ``.delta``/``.snapshot``/``.changelog`` of the real-checkpoint corpus decodes exactly.

The codec comes from the offset log's pinned conf, as a reader must take it.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from stateglass.parsers.changelog import parse_changelog, unwrap_delete_key, unwrap_value_checksum
from stateglass.parsers.compression import decompress
from stateglass.parsers.hdfs_files import iter_records
from tests.parsers.corpus_files import checkpoints, member_names, readable_id

CODEC_CONF = "spark.sql.streaming.stateStore.compression.codec"
ROWCK_CONF = "spark.sql.streaming.stateStore.rowChecksum.enabled"
MERGE_CONF = "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion"
STATE_FILE = re.compile(r"(\d+)(?:_([0-9a-f-]{36}))?\.(delta|snapshot|changelog)")

# UnsafeRow of struct<k:string> with k = "a": null bits, (offset 16 << 32 | size 1), "a" padded.
KEY_A = bytes(8) + ((16 << 32) | 1).to_bytes(8, "little") + b"a" + bytes(7)


def pinned_conf(checkpoint: Path) -> dict[str, str]:
    """The ``conf`` map of the newest offset-log entry (line 2 is OffsetSeqMetadata JSON)."""
    offsets = checkpoint / "offsets"
    newest = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    conf: dict[str, str] = json.loads((offsets / str(newest)).read_text().split("\n")[1])["conf"]
    return conf


def state_files(checkpoint: Path) -> list[Path]:
    """State files by Spark's naming rules: ``<v>.<ext>`` or ``<v>_<uuid>.<ext>``, no sidecars."""
    return sorted(
        p for p in (checkpoint / "state").rglob("*") if p.is_file() and STATE_FILE.fullmatch(p.name)
    )


def expected_changelog_version(checkpoint: str) -> int:
    """Spark picks v1/v2 by "uses column families" and adds 2 for checkpoint format v2."""
    column_families = "/tws" in checkpoint or "-joinv3/" in checkpoint or "-joinv4/" in checkpoint
    return (2 if column_families else 1) + (2 if "-ckv2/" in checkpoint else 0)


def checkpoints_with_state_files() -> list[object]:
    """One param per checkpoint holding ``.delta``/``.snapshot``/``.changelog`` files."""
    roots = sorted(
        {
            name.split("/state/")[0]
            for name in member_names()
            if "/state/" in name and STATE_FILE.fullmatch(name.rsplit("/", 1)[-1])
        }
    )
    params = [pytest.param(r, id=readable_id(r)) for r in roots]
    return params or [pytest.param(None, id="no-corpus", marks=pytest.mark.skip("no corpus"))]


@pytest.mark.parametrize("checkpoint", checkpoints_with_state_files())
def test_every_state_file_decodes(fixture_corpus: Path, checkpoint: str) -> None:
    root = fixture_corpus / checkpoint
    conf = pinned_conf(root)
    codec = conf.get(CODEC_CONF, "lz4")
    row_checksum = conf.get(ROWCK_CONF) == "true"
    delimiter = b"" if conf.get(MERGE_CONF) == "2" else b","
    files = state_files(root)
    assert files
    for path in files:
        name = path.relative_to(root)
        version_text, unique_id, kind = STATE_FILE.fullmatch(path.name).groups()  # type: ignore[union-attr]
        data = decompress(codec, path.read_bytes())
        if kind == "changelog":
            log = parse_changelog(data)
            assert log.format_version == expected_changelog_version(checkpoint), name
            versions = [item.version for item in log.lineage]
            assert versions == sorted(versions), f"{name}: lineage not ascending"
            assert all(v < int(version_text) for v in versions), f"{name}: lineage too new"
            assert (unique_id is not None) == (log.format_version >= 3), name
            if row_checksum:
                for record in log.records:
                    if record.value is None:
                        unwrap_delete_key(record.key)
                    else:
                        unwrap_value_checksum(record.key, record.value, delimiter=delimiter)
        else:
            records = list(
                iter_records(data, allow_deletes=kind == "delta", row_checksum=row_checksum)
            )
            for key, value in records:
                # UnsafeRows are 8-byte aligned, so no value should have needed the pre-2.3 cut.
                assert len(key) % 8 == 0, f"{name}: key of {len(key)} bytes"
                assert value is None or len(value) % 8 == 0, f"{name}: value of {len(value)} bytes"


AGG_HDFS = [
    p for p in checkpoints() if p.values[0] and re.search(r"/agg-hdfs(-\w+)?/", p.values[0] + "/")
]


@pytest.mark.parametrize(
    "checkpoint", [p for p in AGG_HDFS if not p.values[0].endswith("-v1/checkpoint")]
)
def test_agg_key_a_has_four_rows_summing_to_118(fixture_corpus: Path, checkpoint: str) -> None:
    # Inputs for "a": v = 1, 10, 7, 100 over batches 0, 1, 2, 4; state version 6 holds all four.
    root = fixture_corpus / checkpoint
    conf = pinned_conf(root)
    codec = conf.get(CODEC_CONF, "lz4")
    found = {}
    for path in (root / "state" / "0").glob("*/6.snapshot"):
        for key, value in iter_records(
            decompress(codec, path.read_bytes()),
            allow_deletes=False,
            row_checksum=conf.get(ROWCK_CONF) == "true",
        ):
            if key == KEY_A:
                assert value is not None
                found[path.parent.name] = struct.unpack_from("<qq", value, 8)
    assert list(found.values()) == [(4, 118)], found


@pytest.mark.parametrize("version", ["3.5.9", "4.0.5"])
def test_codecs_store_the_same_state(fixture_corpus: Path, version: str) -> None:
    """The same query written with lz4, zstd, snappy and lzf leaves identical records."""

    def state(scenario: str) -> dict[str, dict[bytes, bytes | None]]:
        root = fixture_corpus / version / scenario / "checkpoint"
        codec = pinned_conf(root).get(CODEC_CONF, "lz4")
        return {
            str(p.relative_to(root)): dict(iter_records(decompress(codec, p.read_bytes())))
            for p in state_files(root)
        }

    if not (fixture_corpus / version / "agg-hdfs-lzf").is_dir():
        pytest.skip("codec scenarios not in this corpus")
    reference = state("agg-hdfs")
    assert reference
    for scenario in ("agg-hdfs-zstd", "agg-hdfs-snappy", "agg-hdfs-lzf"):
        assert state(scenario) == reference, scenario


def test_rowck_hdfs_values_carry_the_prefix(fixture_corpus: Path) -> None:
    """4.3 rowChecksum: stored values are 4 bytes longer; without stripping they are cut."""
    root = fixture_corpus / "4.3.0-rowck" / "agg-hdfs" / "checkpoint"
    if not root.is_dir():
        pytest.skip("rowck scenario not in this corpus")
    data = decompress("lz4", (root / "state/0/0/6.snapshot").read_bytes())
    stripped = list(iter_records(data, allow_deletes=False, row_checksum=True))
    raw = list(iter_records(data, allow_deletes=False))
    assert [k for k, _ in stripped] == [k for k, _ in raw]
    plain_root = fixture_corpus / "4.3.0" / "agg-hdfs" / "checkpoint"
    plain = dict(
        iter_records(decompress("lz4", (plain_root / "state/0/0/6.snapshot").read_bytes()))
    )
    assert dict(stripped) == plain
