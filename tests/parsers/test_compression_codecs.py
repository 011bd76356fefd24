"""The four state-store codecs on synthetic streams: round trips and every refusal."""

from __future__ import annotations

import contextlib
import struct

import cramjam
import lz4.block
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stateglass.parsers.compression import CODECS, Codec, decompress, get_codec
from stateglass.parsers.compression import lz4 as lz4_codec
from stateglass.parsers.compression import lzf as lzf_codec
from stateglass.parsers.compression import snappy as snappy_codec
from stateglass.parsers.compression import zstd as zstd_codec
from stateglass.parsers.errors import (
    ChecksumMismatch,
    CorruptData,
    ParseError,
    Truncated,
    UnsupportedFormat,
)
from stateglass.parsers.limits import DEFAULT_LIMITS
from tests.parsers.state_encoders import (
    LZ4_END_BLOCK,
    SNAPPY_HEADER,
    encode_lz4,
    encode_lzf,
    encode_snappy,
)

FAST = settings(max_examples=60, deadline=None, database=None)

# Compressible but not trivial: repeated words with varying numbers.
TEXT = b"".join(b"key-%d value-%d;" % (i % 97, i * 7 % 1000) for i in range(4000))
payloads = st.one_of(
    st.binary(max_size=3000),
    st.lists(st.sampled_from([b"a", b"bc", b"state", b"\x00" * 9, b"xyz" * 5]), max_size=400).map(
        b"".join
    ),
)


# ---------------------------------------------------------------- registry


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("lz4", lz4_codec, id="lz4"),
        pytest.param("LZ4", lz4_codec, id="LZ4-upper"),
        pytest.param("org.apache.spark.io.LZ4CompressionCodec", lz4_codec, id="lz4-class"),
        pytest.param("zstd", zstd_codec, id="zstd"),
        pytest.param("org.apache.spark.io.ZStdCompressionCodec", zstd_codec, id="zstd-class"),
        pytest.param("snappy", snappy_codec, id="snappy"),
        pytest.param("org.apache.spark.io.SnappyCompressionCodec", snappy_codec, id="snappy-class"),
        pytest.param("lzf", lzf_codec, id="lzf"),
        pytest.param("org.apache.spark.io.LZFCompressionCodec", lzf_codec, id="lzf-class"),
    ],
)
def test_registry_maps_spark_names(name: str, expected: Codec) -> None:
    assert get_codec(name) is expected


def test_registry_has_short_and_class_names() -> None:
    assert len(CODECS) == 8


@pytest.mark.parametrize("name", ["gzip", "", "org.apache.spark.io.ZStandardCompressionCodec"])
def test_unknown_codec_is_unsupported(name: str) -> None:
    with pytest.raises(UnsupportedFormat, match="compression codec"):
        decompress(name, b"whatever")


# ---------------------------------------------------------------- lz4


@FAST
@given(raw=payloads, block_size=st.sampled_from([64, 1024, 32 * 1024]))
def test_lz4_round_trip(raw: bytes, block_size: int) -> None:
    assert lz4_codec.decompress(encode_lz4(raw, block_size)) == raw


def test_lz4_text_uses_both_block_kinds() -> None:
    stream = encode_lz4(TEXT, 4096) + encode_lz4(bytes(range(256)) * 2, 512)
    tokens = set()
    pos = 0
    while pos < len(stream):
        _, token, clen, _, _ = struct.unpack_from("<8sBiiI", stream, pos)
        tokens.add(token & 0xF0)
        pos += 21 + clen
    assert tokens == {0x10, 0x20}
    assert decompress("lz4", stream) == TEXT + bytes(range(256)) * 2


def test_lz4_concatenated_streams() -> None:
    assert lz4_codec.decompress(encode_lz4(b"one") + encode_lz4(b"") + encode_lz4(b"two")) == (
        b"onetwo"
    )


def test_lz4_end_block_only_is_empty() -> None:
    assert lz4_codec.decompress(LZ4_END_BLOCK) == b""


def test_lz4_empty_input_is_truncated() -> None:
    with pytest.raises(Truncated):
        lz4_codec.decompress(b"")


def test_lz4_missing_end_block_is_truncated() -> None:
    with pytest.raises(Truncated, match="end block"):
        lz4_codec.decompress(encode_lz4(TEXT, end=False))


def test_lz4_every_cut_is_truncated() -> None:
    stream = encode_lz4(TEXT[:3000], 1024)
    for cut in range(len(stream)):
        with pytest.raises(Truncated):
            lz4_codec.decompress(stream[:cut])


def test_lz4_wrong_magic() -> None:
    stream = encode_lz4(TEXT)
    with pytest.raises(CorruptData, match="magic") as info:
        lz4_codec.decompress(b"LZ5" + stream[3:])
    assert info.value.offset == 0


def test_lz4_checksum_mismatch_names_block_offset() -> None:
    stream = bytearray(encode_lz4(TEXT, 4096))
    second = 21 + struct.unpack_from("<i", stream, 9)[0]
    stream[second + 17] ^= 0x01  # stored checksum of block 2
    with pytest.raises(ChecksumMismatch) as info:
        lz4_codec.decompress(bytes(stream))
    assert info.value.offset == second


def test_lz4_flipped_payload_byte_is_refused() -> None:
    stream = encode_lz4(TEXT, 4096)
    for where in range(21, 21 + 200, 7):
        broken = bytearray(stream)
        broken[where] ^= 0x40
        with pytest.raises((ChecksumMismatch, CorruptData)):
            lz4_codec.decompress(bytes(broken))


def test_lz4_flipped_raw_payload_is_checksum_mismatch() -> None:
    stream = bytearray(encode_lz4(b"plain bytes", force_raw=True))
    stream[25] ^= 0xFF
    with pytest.raises(ChecksumMismatch):
        lz4_codec.decompress(bytes(stream))


def _block(token: int, clen: int, olen: int, check: int, payload: bytes = b"") -> bytes:
    return struct.pack("<8sBiiI", b"LZ4Block", token, clen, olen, check) + payload


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(_block(0x35, 1, 1, 0, b"x"), id="unknown-method"),
        pytest.param(_block(0x15, 3, 4, 0, b"abcd"), id="raw-length-mismatch"),
        pytest.param(_block(0x20, 10, 2000, 0, bytes(10)), id="larger-than-level"),
        pytest.param(_block(0x25, -1, 10, 0), id="negative-length"),
        pytest.param(_block(0x25, 0, 10, 0), id="empty-payload-nonzero-length"),
        pytest.param(_block(0x15, 0, 0, 5), id="end-block-with-checksum"),
        pytest.param(_block(0x25, 5, 10, 0, b"\xff" * 5), id="bad-lz4-payload"),
    ],
)
def test_lz4_impossible_headers(block: bytes) -> None:
    with pytest.raises(CorruptData) as info:
        lz4_codec.decompress(block + LZ4_END_BLOCK)
    assert not isinstance(info.value, ChecksumMismatch)
    assert info.value.offset is not None


def test_lz4_short_decode_is_corrupt() -> None:
    # python-lz4 accepts output shorter than uncompressed_size; lz4-java would not.
    payload = lz4.block.compress(b"a" * 100, store_size=False)
    with pytest.raises(CorruptData, match="decoded to 100 bytes"):
        lz4_codec.decompress(_block(0x25, len(payload), 200, 0, payload) + LZ4_END_BLOCK)


@settings(max_examples=300, deadline=None, database=None)
@given(
    frames=st.lists(payloads, min_size=1, max_size=3),
    block_size=st.sampled_from([64, 1024, 32 * 1024]),
    damage=st.one_of(
        st.none(), st.tuples(st.integers(0, 1 << 16), st.integers(0, 7)), st.integers(0, 1 << 16)
    ),
)
def test_the_compiled_stream_reader_agrees_with_python(
    frames: list[bytes], block_size: int, damage: tuple[int, int] | int | None
) -> None:
    """``decompress`` takes the compiled reader first: on any stream (several concatenated,
    a bit flipped, cut anywhere) it gives Python's bytes, or refuses where Python raises."""
    stream = b"".join(encode_lz4(f, block_size) for f in frames)
    if isinstance(damage, tuple):
        flipped = bytearray(stream)
        flipped[damage[0] % len(stream)] ^= 1 << damage[1]
        stream = bytes(flipped)
    elif damage is not None:
        stream = stream[: damage % (len(stream) + 1)]
    compiled = pytest.importorskip("stateglass.parsers._speedups").lz4_stream
    got = compiled(stream, DEFAULT_LIMITS.budget(len(stream)))
    try:
        want = lz4_codec.decompress_here(stream)
    except ParseError:
        assert got is None
        return
    assert got == want


def test_the_compiled_stream_reader_refuses_past_its_budget() -> None:
    stream = encode_lz4(TEXT)
    compiled = pytest.importorskip("stateglass.parsers._speedups").lz4_stream
    assert compiled(stream, len(TEXT)) == TEXT
    assert compiled(stream, len(TEXT) - 1) is None


# ---------------------------------------------------------------- zstd


@FAST
@given(frames=st.lists(payloads, min_size=1, max_size=4))
def test_zstd_multi_frame_round_trip(frames: list[bytes]) -> None:
    cctx = zstandard.ZstdCompressor(level=1)
    assert zstd_codec.decompress(b"".join(cctx.compress(f) for f in frames)) == b"".join(frames)


def test_zstd_streaming_frames_without_content_size() -> None:
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    chunker = cctx.chunker(chunk_size=1024)
    stream = b"".join([*chunker.compress(TEXT), *chunker.finish()])
    assert decompress("zstd", stream + stream) == TEXT + TEXT


def test_zstd_every_cut_is_truncated() -> None:
    stream = zstandard.ZstdCompressor().compress(TEXT[:2000])
    for cut in range(len(stream)):
        with pytest.raises(Truncated):
            zstd_codec.decompress(stream[:cut])


def test_zstd_garbage_is_corrupt() -> None:
    with pytest.raises(CorruptData) as info:
        zstd_codec.decompress(zstandard.ZstdCompressor().compress(b"ok") + b"not zstd at all")
    assert info.value.offset is not None and info.value.offset > 0


# ---------------------------------------------------------------- snappy


@FAST
@given(raw=payloads, block_size=st.sampled_from([16, 1024, 32 * 1024]))
def test_snappy_round_trip(raw: bytes, block_size: int) -> None:
    assert snappy_codec.decompress(encode_snappy(raw, block_size)) == raw


def test_snappy_concatenated_streams() -> None:
    assert decompress("snappy", encode_snappy(b"abc") + encode_snappy(b"def")) == b"abcdef"


def test_snappy_header_only_is_empty() -> None:
    assert snappy_codec.decompress(SNAPPY_HEADER) == b""


def test_snappy_wrong_magic() -> None:
    with pytest.raises(CorruptData, match="magic"):
        snappy_codec.decompress(b"\x82SNAPPX\x00" + encode_snappy(TEXT)[8:])


def test_snappy_old_version_refused() -> None:
    stream = bytearray(encode_snappy(b"abc"))
    stream[8:12] = struct.pack(">i", 0)
    with pytest.raises(CorruptData, match="version"):
        snappy_codec.decompress(bytes(stream))


def test_snappy_cuts() -> None:
    stream = encode_snappy(TEXT[:5000], 1024)
    boundaries = {16}
    pos = 16
    while pos < len(stream):
        pos += 4 + struct.unpack_from(">i", stream, pos)[0]
        boundaries.add(pos)
    for cut in range(len(stream)):
        if cut in boundaries:
            # No end marker in the framing: a cut between chunks decodes to a prefix.
            assert TEXT.startswith(snappy_codec.decompress(stream[:cut]))
        else:
            with pytest.raises(Truncated):
                snappy_codec.decompress(stream[:cut])


def test_snappy_corrupt_chunk() -> None:
    block = b"\x05\xff\xff\xff\xff"
    with pytest.raises(CorruptData) as info:
        snappy_codec.decompress(SNAPPY_HEADER + struct.pack(">i", len(block)) + block)
    assert info.value.offset == 16


def test_snappy_absurd_declared_length_is_refused() -> None:
    block = b"\xff\xff\xff\xff\x0f" + b"\x00" * 3  # varint 4 GiB - 1
    with pytest.raises(CorruptData, match="claims"):
        snappy_codec.decompress(SNAPPY_HEADER + struct.pack(">i", len(block)) + block)


def test_snappy_negative_chunk_length() -> None:
    with pytest.raises(CorruptData, match="negative"):
        snappy_codec.decompress(SNAPPY_HEADER + struct.pack(">i", -5))


def test_snappy_matches_cramjam_framing_free_blocks() -> None:
    raw = TEXT[:100]
    block = bytes(cramjam.snappy.compress_raw(raw))
    assert snappy_codec.decompress(SNAPPY_HEADER + struct.pack(">i", len(block)) + block) == raw


# ---------------------------------------------------------------- lzf


@FAST
@given(raw=payloads, chunk_size=st.sampled_from([50, 0xFFFF]), compress=st.booleans())
def test_lzf_round_trip(raw: bytes, chunk_size: int, compress: bool) -> None:
    stream = encode_lzf(raw, chunk_size, compress=compress)
    if raw:
        assert lzf_codec.decompress(stream) == raw


def test_lzf_text_is_compressed() -> None:
    stream = encode_lzf(TEXT)
    assert stream[2] == 1 and len(stream) < len(TEXT) // 2
    assert decompress("lzf", stream) == TEXT


def test_lzf_overlapping_back_reference() -> None:
    # literal "ab", then copy 9 bytes from distance 2: "ababababab" + "a"
    block = b"\x01ab" + bytes([(7 << 5) | 0, 0, 1])
    stream = b"ZV\x01" + struct.pack(">HH", len(block), 11) + block
    assert lzf_codec.decompress(stream) == b"abababababa"


def test_lzf_long_back_reference() -> None:
    block = b"\x02xyz" + bytes([(7 << 5) | 0, 100, 2])  # length 7 + 100 + 2 = 109, distance 3
    stream = b"ZV\x01" + struct.pack(">HH", len(block), 112) + block
    assert lzf_codec.decompress(stream) == (b"xyz" * 38)[:112]


@pytest.mark.parametrize(
    ("stream", "error"),
    [
        pytest.param(b"", Truncated, id="empty"),
        pytest.param(b"ZV\x00\x00", Truncated, id="short-header"),
        pytest.param(b"ZV\x00\x00\x05abc", Truncated, id="short-stored"),
        pytest.param(b"ZV\x01\x00\x05\x00\x09\x01ab", Truncated, id="short-compressed"),
        pytest.param(b"ZX\x00\x00\x01a", CorruptData, id="bad-magic"),
        pytest.param(b"ZV\x02\x00\x01a", CorruptData, id="bad-type"),
        pytest.param(b"ZV\x01\x00\x03\x00\x05\x20\x00\x00", CorruptData, id="ref-before-start"),
        pytest.param(b"ZV\x01\x00\x02\x00\x05\x04a", CorruptData, id="literal-overrun"),
        pytest.param(b"ZV\x01\x00\x02\x00\x05\x00a", CorruptData, id="length-mismatch"),
        pytest.param(b"ZV\x01\x00\x03\x00\x09\x00a\xe0", CorruptData, id="ref-overrun"),
    ],
)
def test_lzf_refusals(stream: bytes, error: type[ParseError]) -> None:
    with pytest.raises(error):
        lzf_codec.decompress(stream)


def test_lzf_back_reference_stays_in_its_chunk() -> None:
    first = b"ZV\x00\x00\x03abc"
    block = b"\x20\x02"  # copy 3 from distance 3: only valid across the chunk boundary
    second = b"ZV\x01" + struct.pack(">HH", len(block), 3) + block
    with pytest.raises(CorruptData, match="before the start"):
        lzf_codec.decompress(first + second)


# ---------------------------------------------------------------- all codecs

ENCODERS = {
    "lz4": lambda raw: encode_lz4(raw, 1024),
    "zstd": lambda raw: zstandard.ZstdCompressor().compress(raw),
    "snappy": lambda raw: encode_snappy(raw, 1024),
    "lzf": lambda raw: encode_lzf(raw, 1000),
}


@pytest.mark.parametrize("codec", sorted(ENCODERS))
@settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_mutations_raise_only_parse_errors(codec: str, data: st.DataObject) -> None:
    stream = bytearray(ENCODERS[codec](TEXT[:4000]))
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.integers(0, len(stream) - 1))
        stream[where] ^= 1 << data.draw(st.integers(0, 7))
    cut = data.draw(st.integers(0, len(stream)))
    with contextlib.suppress(ParseError):
        decompress(codec, bytes(stream[:cut]))
