"""Every framing of every codec under the decompression budget: a growing stream (an event
log) is held to the ratio over all it decodes and to ``max_file_bytes`` a piece, so a log of
a few KiB that claims gigabytes is refused before it expands."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import zstandard

from stateglass.parsers import eventlog
from stateglass.parsers.compression import CODECS, decode_prefix, decompress
from stateglass.parsers.errors import LimitExceeded
from stateglass.parsers.limits import Allowance, DecodeLimits
from tests.damage.hostile import peak_allocation
from tests.parsers.state_encoders import encode_lz4, encode_lzf, encode_snappy

MIB = 1 << 20
TEXT = b'{"Event":"SparkListenerTaskEnd","Stage ID":7}\n' * 40_000  # ~1.8 MiB of lines

ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "lz4": lambda raw: encode_lz4(raw, 64 * 1024),
    "zstd": lambda raw: zstandard.ZstdCompressor().compress(raw),
    "snappy": lambda raw: encode_snappy(raw, 64 * 1024),
    "lzf": lambda raw: encode_lzf(raw),
}
TIGHT = DecodeLimits(max_ratio=2, min_bytes=0)


def _zstd_zeros(size: int) -> bytes:
    """One zstd frame of ``size`` zero bytes, written a MiB at a time (a few KiB per GiB)."""
    writer = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    piece = bytes(MIB)
    return b"".join(writer.compress(piece) for _ in range(size // MIB)) + writer.flush()


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_every_framing_within_its_budget_decodes(codec: str) -> None:
    stream = ENCODERS[codec](TEXT)
    assert decompress(codec, stream) == TEXT
    assert decode_prefix(codec, stream).text == TEXT


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_a_growing_stream_past_its_budget_is_refused(codec: str) -> None:
    stream = ENCODERS[codec](TEXT)
    with pytest.raises(LimitExceeded, match="decompression limit: max_ratio 2, min_bytes"):
        decode_prefix(codec, stream, limits=TIGHT)
    with pytest.raises(LimitExceeded, match="decompression limit"):
        eventlog.read_events(stream, codec, limits=TIGHT)


@pytest.mark.parametrize("codec", sorted(ENCODERS))
def test_a_resumed_read_is_held_to_what_it_decodes(codec: str) -> None:
    """The budget of a read that resumes mid-file is that of the bytes it reads."""
    stream = ENCODERS[codec](TEXT + TEXT)
    first = eventlog.read_events(stream[: len(stream) // 2], codec)
    with pytest.raises(LimitExceeded):
        eventlog.read_events(stream, codec, first.raw_offset, first.text_offset, TIGHT)


def test_an_event_log_frame_of_a_gib_is_refused_without_expanding() -> None:
    """zstd-jni frames do not declare their size: 1 GiB of zeros is one 32 KiB frame."""
    bomb = _zstd_zeros(1 << 30)
    assert len(bomb) < 64 * 1024

    def read() -> None:
        with pytest.raises(LimitExceeded, match=r"zstd: expands to more than 16\.0 MiB"):
            eventlog.read_events(bomb, "zstd")

    # The budget (16 MiB), the piece that passed it, and the partial line's copy at most.
    assert peak_allocation(read) < 64 * MIB


def test_a_line_without_its_end_is_held_to_max_file_bytes() -> None:
    """Within the ratio, a line never ended grows in memory: ``max_file_bytes`` bounds it."""
    limits = DecodeLimits(max_ratio=1 << 20, max_file_bytes=MIB)
    stream = encode_lz4(b"x" * (8 * MIB), 64 * 1024)
    with pytest.raises(LimitExceeded, match=r"a line not ended: 1\.1 MiB held at once"):
        eventlog.read_events(stream, "lz4", limits=limits)
    lines = encode_lz4((b"x" * 1000 + b"\n") * 8000, 64 * 1024)
    assert eventlog.read_events(lines, "lz4", limits=limits).lines_read == 8000


def test_a_streamed_budget_leaves_the_cap_to_each_piece() -> None:
    """A day of events decodes to gigabytes, a block at a time: the total is held to the
    ratio, not to max_file_bytes."""
    allowance = Allowance(DecodeLimits(max_file_bytes=MIB), 10 * MIB, streamed=True)
    for _ in range(100):
        allowance.claim("zstd", MIB // 2)
    assert allowance.claimed == 50 * MIB
    assert allowance.piece == MIB
    with pytest.raises(LimitExceeded, match="held at once"):
        allowance.claim("zstd", 2 * MIB)


def test_every_codec_module_is_one_registry_entry() -> None:
    assert {codec.NAME for codec in CODECS.values()} == {"lz4", "lzf", "snappy", "zstd"}
    for name, codec in CODECS.items():
        assert name in (codec.NAME, *(n for n in CODECS if "." in n))
