"""Checksum files as Spark and Hadoop write them: the sample checkpoints' ``.NAME.crc``
sidecars and the corpus' Spark 4.3 ``NAME.crc`` files all verify, and any flipped bit fails."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.checksums import (
    HadoopCrc,
    SparkChecksum,
    verify_hadoop,
    verify_spark,
)
from stateglass.parsers.errors import CorruptData
from tests.conftest import SAMPLES


def _sidecars() -> list[Path]:
    return sorted(SAMPLES.glob("demo/healthy/**/.*.crc"))


def test_every_hadoop_sidecar_of_a_sample_verifies_and_any_bit_flip_fails() -> None:
    sidecars = _sidecars()
    assert len(sidecars) > 20
    rng = random.Random(7)
    for crc in sidecars:
        main = crc.parent / crc.name[1:-4]
        data = main.read_bytes()
        assert verify_hadoop(data, crc.read_bytes(), str(crc)) is None, main
        if data:
            flipped = bytearray(data)
            flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            assert verify_hadoop(bytes(flipped), crc.read_bytes()) is not None, main
    header = HadoopCrc.from_bytes(sidecars[0].read_bytes())
    assert header.bytes_per_checksum == 512


def test_a_truncated_file_fails_its_sidecar() -> None:
    crc = next(c for c in _sidecars() if (c.parent / c.name[1:-4]).stat().st_size > 600)
    data = (crc.parent / crc.name[1:-4]).read_bytes()
    assert "chunks" in (verify_hadoop(data[:500], crc.read_bytes()) or "")


def test_spark_checksum_files_of_the_corpus_verify(fixture_corpus: Path) -> None:
    found = sorted(
        p for p in fixture_corpus.glob("*/*/checkpoint/**/*.crc") if not p.name.startswith(".")
    )
    assert found, "the corpus has Spark 4.x checksum files (checkpoint format v2)"
    for crc in found[:50]:
        main = crc.parent / crc.name[:-4]
        record = SparkChecksum.from_json(crc.read_bytes())
        assert record.algorithm == "CRC32C" and record.main_file_size == main.stat().st_size
        data = main.read_bytes()
        assert verify_spark(data, crc.read_bytes()) is None, main
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x80
        assert "CRC32C" in (verify_spark(bytes(flipped), crc.read_bytes()) or "")


@pytest.mark.parametrize(
    "sidecar",
    [b"", b"crc", b"xyz\x00\x00\x00\x02\x00", b"crc\x00\x00\x00\x00\x00", b"crc\x00\0\0\2\0\1"],
)
def test_a_bad_hadoop_sidecar_is_one_clear_error(sidecar: bytes) -> None:
    with pytest.raises(CorruptData):
        verify_hadoop(b"data", sidecar, "/cp/.x.crc")


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=3000), st.sampled_from([1, 16, 512]))
def test_hadoop_round_trip(data: bytes, per: int) -> None:
    import struct
    import zlib

    chunks = [data[i : i + per] for i in range(0, len(data), per)]
    sidecar = (
        b"crc\x00"
        + struct.pack(">i", per)
        + b"".join(struct.pack(">I", zlib.crc32(c)) for c in chunks)
    )
    assert verify_hadoop(data, sidecar) is None
