"""Damaged copies of real state files: only ``ParseError`` subclasses may come out.

Each sample is a real file from the corpus; a cut anywhere must read as ``Truncated``, and
random bit flips (plus cuts) may decode or fail, but never with a foreign exception.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.changelog import parse_changelog, unwrap_delete_key, unwrap_value_checksum
from stateglass.parsers.compression import decompress
from stateglass.parsers.errors import ParseError, Truncated
from stateglass.parsers.hdfs_files import iter_records


@dataclass(frozen=True)
class Sample:
    """One real file and how a reader decodes it."""

    name: str  # scenario-relative glob; the largest match is used
    codec: str
    kind: str  # "delta" | "snapshot" | "changelog"
    row_checksum: bool = False
    delimiter: bytes = b""


SAMPLES = [
    Sample("3.5.9/agg-hdfs/checkpoint/state/0/*/6.snapshot", "lz4", "snapshot"),
    Sample("3.5.9/agg-hdfs-zstd/checkpoint/state/0/*/6.snapshot", "zstd", "snapshot"),
    Sample("3.5.9/agg-hdfs-snappy/checkpoint/state/0/*/6.snapshot", "snappy", "snapshot"),
    Sample("3.5.9/agg-hdfs-lzf/checkpoint/state/0/*/6.snapshot", "lzf", "snapshot"),
    Sample("3.5.9/join-hdfs/checkpoint/state/0/*/*/*.delta", "lz4", "delta"),
    Sample("4.3.0-rowck/agg-hdfs/checkpoint/state/0/*/*.delta", "lz4", "delta", True),
    Sample("3.5.9/agg-rocks-cl/checkpoint/state/0/*/*.changelog", "lz4", "changelog"),
    Sample("4.0.5b/tws-rocks-cl/checkpoint/state/0/*/*.changelog", "lz4", "changelog"),
    Sample("4.0.5b/agg-rocks-cl-ckv2/checkpoint/state/0/*/*.changelog", "lz4", "changelog"),
    Sample("4.3.0/tws-rocks-cl-ckv2/checkpoint/state/0/*/*.changelog", "lz4", "changelog"),
    Sample("4.3.0-rowck/tws-rocks-cl/checkpoint/state/0/*/*.changelog", "lz4", "changelog", True),
]


def decode(sample: Sample, data: bytes) -> object:
    """Everything a reader does with the file's bytes, row checksums included."""
    raw = decompress(sample.codec, data)
    if sample.kind != "changelog":
        return list(
            iter_records(
                raw, allow_deletes=sample.kind == "delta", row_checksum=sample.row_checksum
            )
        )
    log = parse_changelog(raw)
    if sample.row_checksum:
        for record in log.records:
            if record.value is None:
                unwrap_delete_key(record.key)
            else:
                unwrap_value_checksum(record.key, record.value, delimiter=sample.delimiter)
    return log


@pytest.fixture(scope="module")
def sample_bytes(fixture_corpus: Path) -> Callable[[Sample], bytes]:
    """Bytes of the largest file matching each sample (files are a few hundred bytes)."""
    cache: dict[Sample, bytes] = {}

    def load(sample: Sample) -> bytes:
        if sample not in cache:
            matches = sorted(fixture_corpus.glob(sample.name), key=lambda p: -p.stat().st_size)
            if not matches:
                pytest.skip(f"{sample.name} not in this corpus")
            cache[sample] = matches[0].read_bytes()
        return cache[sample]

    return load


@pytest.mark.parametrize(
    "sample", [pytest.param(s, id=s.name.split("/checkpoint")[0] + "/" + s.kind) for s in SAMPLES]
)
def test_sample_decodes_and_every_cut_is_truncated(
    sample: Sample, sample_bytes: Callable[[Sample], bytes]
) -> None:
    data = sample_bytes(sample)
    decode(sample, data)
    for cut in range(len(data)):
        with pytest.raises(Truncated):
            decode(sample, data[:cut])


@settings(max_examples=400, deadline=None, database=None)
@given(data=st.data())
def test_bit_flips_raise_only_parse_errors(
    sample_bytes: Callable[[Sample], bytes], data: st.DataObject
) -> None:
    sample = data.draw(st.sampled_from(SAMPLES))
    original = sample_bytes(sample)
    damaged = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        where = data.draw(st.integers(0, len(damaged) - 1))
        damaged[where] ^= 1 << data.draw(st.integers(0, 7))
    cut = data.draw(st.one_of(st.just(len(damaged)), st.integers(0, len(damaged))))
    try:
        decode(sample, bytes(damaged[:cut]))
    except ParseError:
        return
    if sample.codec == "lz4":
        # Every lz4 block is checksummed: whatever still decodes decodes to the original.
        assert decompress("lz4", bytes(damaged[:cut])) == decompress("lz4", original)
