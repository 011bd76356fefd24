"""A DynamoDB store's records are gzip: each is inflated within the decompression budget."""

from __future__ import annotations

import gzip
import struct

import pytest

from stateglass.collectors.stores.dynamodb import decode_record
from stateglass.parsers.errors import LimitExceeded
from stateglass.parsers.limits import DecodeLimits
from tests.damage.hostile import peak_allocation

RECORD = struct.pack(">i", 3) + b"key" + struct.pack(">i", 5) + b"value"


def test_a_record_decodes() -> None:
    assert decode_record(gzip.compress(RECORD)) == (b"key", b"value")
    removed = struct.pack(">i", 3) + b"key" + struct.pack(">i", -1)
    assert decode_record(gzip.compress(removed)) == (b"key", None)
    with pytest.raises(EOFError):
        decode_record(gzip.compress(RECORD)[:-12])


def test_a_gzip_bomb_is_refused_before_it_inflates() -> None:
    bomb = gzip.compress(RECORD + bytes(256 << 20))  # ~256 KiB of gzip
    assert len(bomb) < 1 << 20

    def read() -> None:
        with pytest.raises(LimitExceeded, match=r"gzip: expands to more than 16\.0 MiB"):
            decode_record(bomb)

    # The budget, and the buffer zlib grows to reach it: far from the 256 MiB inside.
    assert peak_allocation(read) < 48 << 20
    assert decode_record(bomb, DecodeLimits(min_bytes=512 << 20)) == (b"key", b"value")
