"""RocksDB's tables read in C: their data blocks (``_speedups.sst_data_blocks``) as the Python
reader decodes them, and tables merged by key (``_speedups.runs_columns``) as RocksDB itself
reads the newest state. On every SST of the samples and the corpus, and on random workloads
written by RocksDB (rocksdict) with flushes and compactions between them."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
import rocksdict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stateglass.parsers.errors import ParseError
from stateglass.parsers.limits import DEFAULT_LIMITS
from stateglass.parsers.sst import FOOTER_SIZE, _properties, _Table, _walked_entries, sst_sorted_run
from tests.conftest import SAMPLES

_speedups = pytest.importorskip("stateglass.parsers._speedups")
_LZ4 = 4
_MERGE_OPERANDS = b"rocksdb.merge.operands"


@pytest.fixture(scope="module")
def tables(fixture_corpus: Path) -> list[tuple[str, bytes]]:
    """Every SST of the samples and the corpus, by name."""
    paths = sorted(SAMPLES.glob("spark-*/**/SSTs/*.sst"))
    paths += sorted(fixture_corpus.glob("*/*/checkpoint/state/**/SSTs/*.sst"))
    return [(str(p), p.read_bytes()) for p in paths]


def python_blocks(data: bytes) -> list[bytes]:
    return list(_Table(data, DEFAULT_LIMITS).data_blocks())


def compiled_blocks(data: bytes, budget: int = 1 << 40) -> list[bytes] | None:
    table = _Table(data, DEFAULT_LIMITS)
    index = table.block(*table.index, "index block")
    found = _speedups.sst_data_blocks(data, index, table.version, table.checksum, budget)
    return None if found is None else found[0]


def compression(data: bytes) -> int:
    table = _Table(data, DEFAULT_LIMITS)
    offset, size = table.data_handles[0]
    return data[offset + size]


def test_compiled_blocks_are_the_python_readers(tables: list[tuple[str, bytes]]) -> None:
    """LZ4 tables (Spark 4) are read in C, block for block what Python decodes; Snappy
    tables (Spark 3.5) are left to Python."""
    read = 0
    for name, data in tables:
        got = compiled_blocks(data)
        if compression(data) == _LZ4:
            assert got == python_blocks(data), name
            read += 1
        else:
            assert got is None, name
    assert read > 100


def test_the_budget_refuses_before_decoding(tables: list[tuple[str, bytes]]) -> None:
    name, data = next((n, d) for n, d in tables if compression(d) == _LZ4)
    declared = sum(len(b) for b in python_blocks(data))
    assert compiled_blocks(data, declared) is not None, name
    assert compiled_blocks(data, declared - 1) is None, name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_damaged_table_is_refused_or_read_as_python_reads_it(
    tables: list[tuple[str, bytes]], data: st.DataObject
) -> None:
    """A flipped bit anywhere before the footer: the compiled path refuses or raises (Python
    or RocksDB then names the damage), or reads the blocks Python reads."""
    lz4 = [d for _, d in tables if compression(d) == _LZ4]
    table = data.draw(st.sampled_from(lz4[:50]), label="table")
    at = data.draw(st.integers(0, len(table) - FOOTER_SIZE - 1), label="byte")
    flipped = bytearray(table)
    flipped[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    damaged = bytes(flipped)
    try:
        got: list[bytes] | None = sst_sorted_run(damaged)
    except ParseError:
        got = None  # named, and RocksDB's own read is left to say it
    try:
        want = python_blocks(damaged)
    except ParseError:
        assert got is None
        return
    # Stricter than the Python walk is allowed: a damaged filter block RocksDB also refuses.
    assert got is None or got == want


def test_tables_with_merge_operands_are_left_to_rocksdb(tables: list[tuple[str, bytes]]) -> None:
    """Spark's list state appends with RocksDB's merge operator: such a table is refused."""
    seen = 0
    for name, data in tables:
        table = _Table(data, DEFAULT_LIMITS)
        handles = {n: (o, s) for n, o, s in table.meta_handles}
        operands = _properties(table.block(*handles[b"rocksdb.properties"]))[_MERGE_OPERANDS]
        if operands != b"\x00":
            assert sst_sorted_run(data) is None, name
            seen += 1
        else:
            assert sst_sorted_run(data) is not None, name
    assert seen > 10


# ---- merging: random workloads RocksDB wrote ------------------------------------------------

KEYS = st.binary(min_size=0, max_size=12)
Op = tuple[bytes, bytes | None]  # (key, value) or (key, None): a delete


def merged(
    runs: Sequence[Sequence[bytes]], strip: bool = False
) -> list[tuple[bytes, bytes]] | None:
    found = _speedups.runs_columns([list(r) for r in runs], True, True, strip)
    if found is None:
        return None
    rows, (koff, kdata), (voff, vdata) = found
    keys = pa.Array.from_buffers(
        pa.large_binary(), rows, [None, pa.py_buffer(koff), pa.py_buffer(kdata)]
    )
    values = pa.Array.from_buffers(
        pa.large_binary(), rows, [None, pa.py_buffer(voff), pa.py_buffer(vdata)]
    )
    return list(zip(keys.to_pylist(), values.to_pylist(), strict=True))


@dataclass(frozen=True)
class Layout:
    """How RocksDB lays its tables out: Spark's ``format_version`` 5, blocks small enough
    that a table has many, and every codec and checksum the C reader takes (Snappy is read
    block by block in Python)."""

    checksum: str
    compression: str
    block_size: int
    restart_interval: int


LAYOUTS = st.builds(
    Layout,
    st.sampled_from(["crc32c", "xxhash", "xxhash64", "xxh3", "no_checksum"]),
    st.sampled_from(["lz4", "lz4hc", "none", "snappy"]),
    st.sampled_from([64, 256, 4096]),
    st.integers(1, 16),
)
SPARK = Layout("xxh3", "lz4", 4096, 16)


def written(
    tmp: Path, batches: list[list[Op]], compact_after: int | None, layout: Layout = SPARK
) -> tuple[list[list[bytes]], list[tuple[bytes, bytes]]]:
    """Each batch written and flushed into its own table (compacting all after batch
    ``compact_after``): the live tables' sorted runs, and what RocksDB reads."""
    table = rocksdict.BlockBasedOptions()
    table.set_format_version(5)
    table.set_block_size(layout.block_size)
    table.set_block_restart_interval(layout.restart_interval)
    table.set_checksum_type(getattr(rocksdict.ChecksumType, layout.checksum)())
    table.set_bloom_filter(10, False)
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_disable_auto_compactions(True)
    options.set_compression_type(getattr(rocksdict.DBCompressionType, layout.compression)())
    options.set_block_based_table_factory(table)
    db = rocksdict.Rdict(str(tmp), options=options)
    try:
        for i, batch in enumerate(batches):
            for key, value in batch:
                if value is None:
                    del db[key]
                else:
                    db[key] = value
            db.flush()
            if compact_after == i:
                db.compact_range(None, None)
        names = [f["name"].lstrip("/") for f in db.live_files()]
        want = list(db.items())
    finally:
        db.close()
    runs = []
    for name in names:
        run = sst_sorted_run((tmp / name).read_bytes())
        assert run is not None, name
        runs.append(run)
    return runs, want


# Each example asks tmp_path_factory for a directory of its own.
FRESH_DIRECTORIES = [HealthCheck.function_scoped_fixture]
OPS = st.lists(
    st.lists(st.tuples(KEYS, st.one_of(st.none(), st.binary(max_size=40))), max_size=60),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=OPS, compact=st.one_of(st.none(), st.integers(0, 5)), layout=LAYOUTS)
def test_merged_runs_are_what_rocksdb_reads(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[list[Op]],
    compact: int | None,
    layout: Layout,
) -> None:
    runs, want = written(tmp_path_factory.mktemp("db"), batches, compact, layout)
    assert merged(runs) == want


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=OPS)
def test_stripped_runs_cut_the_version_byte_or_refuse(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[Op]]
) -> None:
    """Spark's RocksDB rows start with encoding version 0 on both sides: cut, or (a pair
    that does not) the merge refuses and RocksDB's own read is used."""
    versioned = [[(b"\0" + k, None if v is None else b"\0" + v) for k, v in b] for b in batches]
    runs, want = written(tmp_path_factory.mktemp("db"), versioned, None)
    assert merged(runs, strip=True) == [(k[1:], v[1:]) for k, v in want]
    runs, want = written(tmp_path_factory.mktemp("db"), batches, None)
    plain = all(k[:1] == b"\0" and v[:1] == b"\0" for k, v in want)
    assert merged(runs, strip=True) == ([(k[1:], v[1:]) for k, v in want] if plain else None)


# ---- what the merge refuses -----------------------------------------------------------------
# RocksDB's writers never make these tables from a plain workload, so the blocks are built here,
# in the layout parsers/sst.py documents (every entry a restart point).


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def block(entries: Sequence[tuple[bytes, int, int, bytes]]) -> bytes:
    """A data block of (user key, sequence, type, value) entries, keys whole."""
    out = bytearray()
    restarts = []
    for key, seq, kind, value in entries:
        restarts.append(len(out))
        internal = key + struct.pack("<Q", seq << 8 | kind)
        out += b"\0" + uvarint(len(internal)) + uvarint(len(value)) + internal + value
    for at in restarts:
        out += struct.pack("<I", at)
    return bytes(out + struct.pack("<I", len(restarts)))


def test_the_newest_entry_of_a_key_decides() -> None:
    older = [block([(b"a", 1, 1, b"old"), (b"b", 2, 1, b"kept")])]
    newer = [block([(b"a", 5, 0, b""), (b"c", 6, 1, b"new")])]
    assert merged([older, newer]) == [(b"b", b"kept"), (b"c", b"new")]
    assert merged([newer, older]) == [(b"b", b"kept"), (b"c", b"new")]


@pytest.mark.parametrize(
    "runs",
    [
        pytest.param([[block([(b"a", 1, 2, b"operand")])]], id="merge-operand"),
        pytest.param([[block([(b"a", 1, 0x11, b"blob")])]], id="blob-index"),
        pytest.param(
            [[block([(b"a", 3, 1, b"x")])], [block([(b"a", 3, 1, b"y")])]], id="sequence-tie"
        ),
        pytest.param([[block([(b"b", 1, 1, b"x"), (b"a", 2, 1, b"y")])]], id="out-of-order"),
        pytest.param([[block([(b"a", 1, 1, b"x"), (b"a", 2, 1, b"y")])]], id="older-first"),
        pytest.param([[b"\x00\x00"]], id="short-block"),
        pytest.param([[block([(b"a", 1, 1, b"x")])[:-9] + struct.pack("<I", 1)]], id="cut"),
    ],
)
def test_what_the_merge_cannot_resolve_alone_is_refused(runs: list[list[bytes]]) -> None:
    assert merged(runs) is None


# A version made of more tables than the merge scans in a row (eight) is merged through a
# heap: the same cases again, with nine tables of other keys beside them.
FILLER = [[block([(b"~%d" % i, 100 + i, 1, b"f")])] for i in range(9)]


@pytest.mark.parametrize(
    "runs",
    [
        pytest.param([[block([(b"a", 3, 1, b"x")])], [block([(b"a", 3, 1, b"y")])]], id="tie"),
        pytest.param([[block([(b"b", 1, 1, b"x"), (b"a", 2, 1, b"y")])]], id="out-of-order"),
        pytest.param([[block([(b"a", 1, 1, b"x"), (b"a", 2, 1, b"y")])]], id="older-first"),
        pytest.param([[block([(b"a", 1, 2, b"operand")])]], id="merge-operand"),
        pytest.param(
            [[block([(b"a", 3, 0, b"")])], [block([(b"a", 1, 0, b""), (b"a", 2, 0, b"")])]],
            id="older-first-behind-a-newer-table",
        ),
    ],
)
def test_many_tables_refuse_as_few_do(runs: list[list[bytes]]) -> None:
    assert merged(runs) is None
    assert merged(runs + FILLER) is None
    assert merged(FILLER + runs) is None


Entry = tuple[bytes, int, int, bytes]  # user key, sequence, type, value


@st.composite
def sorted_runs(draw: st.DrawFn) -> list[list[Entry]]:
    """1 to 20 tables of entries over a few keys, each table in RocksDB's order (keys
    ascending, a key's newer entries first), sequence numbers unique across them."""
    count = draw(st.integers(1, 20))
    entries = draw(
        st.lists(
            st.tuples(st.binary(max_size=3), st.sampled_from([0, 1, 1, 7]), st.binary(max_size=6)),
            max_size=150,
        )
    )
    sequences = draw(st.permutations(range(1, len(entries) + 1)))
    runs: list[list[Entry]] = [[] for _ in range(count)]
    for (key, kind, value), seq in zip(entries, sequences, strict=True):
        runs[draw(st.integers(0, count - 1))].append((key, seq, kind, value))
    for run in runs:
        run.sort(key=lambda e: (e[0], -e[1]))
    return runs


def in_blocks(run: list[Entry], cuts: list[int]) -> list[bytes]:
    """A table's entries in data blocks cut at ``cuts`` (an empty block is never written)."""
    at = sorted({0, len(run), *(c % (len(run) + 1) for c in cuts)})
    return [block(run[a:b]) for a, b in itertools.pairwise(at) if b > a]


@settings(max_examples=300, deadline=None)
@given(runs=sorted_runs(), cuts=st.lists(st.integers(0, 150), max_size=5))
def test_any_number_of_tables_merges_to_each_keys_newest_entry(
    runs: list[list[Entry]], cuts: list[int]
) -> None:
    """Whether the merge scans the tables' heads in a row or keeps a heap of them: per user
    key the highest sequence decides (a value is a row, a deletion none), keys ascending."""
    newest: dict[bytes, Entry] = {}
    for entry in (e for run in runs for e in run):
        if entry[0] not in newest or entry[1] > newest[entry[0]][1]:
            newest[entry[0]] = entry
    want = [(key, e[3]) for key, e in sorted(newest.items()) if e[2] == 1]
    assert merged([in_blocks(run, cuts) for run in runs]) == want


@settings(max_examples=200, deadline=None)
@given(runs=sorted_runs(), data=st.data())
def test_a_table_out_of_order_anywhere_is_refused(
    runs: list[list[Entry]], data: st.DataObject
) -> None:
    """Two neighbouring entries of one table swapped (keys descending, or a key's older entry
    first): refused, however many tables there are."""
    swappable = [(r, i) for r, run in enumerate(runs) for i in range(len(run) - 1)]
    if not swappable:
        return
    r, i = data.draw(st.sampled_from(swappable))
    run = runs[r]
    run[i], run[i + 1] = run[i + 1], run[i]
    assert merged([[block(run)] if run else [] for run in runs]) is None


def test_merged_columns_are_read_only_and_outlive_their_tuple() -> None:
    """The merge hands its buffers over without a copy: Arrow reads them after the result is
    gone, and nothing writes into them."""
    import ctypes
    import gc

    found = _speedups.runs_columns([[block([(b"k", 1, 1, b"v")])]], True, True, False)
    assert found is not None
    rows, (offsets, data), _ = found
    with pytest.raises(TypeError):  # not writable
        ctypes.c_char.from_buffer(data)
    array = pa.Array.from_buffers(
        pa.large_binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    del found, offsets, data
    gc.collect()
    assert array.to_pylist() == [b"k"]


# ---- values decoded as the merge takes them -------------------------------------------------


@st.composite
def fixed_value_runs(draw: st.DrawFn) -> tuple[list[list[Entry]], tuple[int, ...]]:
    """Tables as ``sorted_runs`` makes them, their values UnsafeRows of fixed-width fields
    of ``sizes`` (random bytes: null bits and slots alike), now and then one too short."""
    runs = draw(sorted_runs())
    sizes = tuple(draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=64)))
    width = 8 * ((len(sizes) + 63) // 64 + len(sizes))
    short = draw(st.integers(0, 30))  # one chance in 31 that a value is too short
    for run in runs:
        for i, (key, seq, kind, _) in enumerate(run):
            if draw(st.integers(0, 30)) == short:
                size = draw(st.one_of(st.just(width - 1), st.integers(0, width - 1)))
            else:
                size = draw(st.integers(width, width + 9))
            run[i] = (key, seq, kind, draw(st.binary(min_size=size, max_size=size)))
    return runs, sizes


@settings(max_examples=300, deadline=None)
@given(case=fixed_value_runs(), cuts=st.lists(st.integers(0, 150), max_size=5))
def test_values_decoded_as_taken_are_the_fields_of_the_rows(
    case: tuple[list[list[Entry]], tuple[int, ...]], cuts: list[int]
) -> None:
    """With the value rows' field sizes, the merge gives each field's column as
    ``flat_struct`` makes it from the merged rows; a live row too short for its fields
    refuses the merge, as ``flat_struct`` refuses the rows (a shadowed one does not)."""
    runs, sizes = case
    blocks = [in_blocks(run, cuts) for run in runs]
    whole = _speedups.runs_columns(blocks, False, True, False)
    fused = _speedups.runs_columns(blocks, False, True, False, sizes)
    assert whole is not None
    rows, _, (offsets, data) = whole
    want = _speedups.flat_struct(offsets, data, 0, rows, sizes)
    if want is None:
        assert fused is None
        return
    assert fused is not None
    got_rows, no_keys, fields = fused
    assert (got_rows, no_keys) == (rows, None)
    assert [
        (bytes(values), None if bits is None else bytes(bits), nulls, ends)
        for values, bits, nulls, ends in fields
    ] == [(bytes(v), b if b is None else bytes(b), n, e) for v, b, n, e in want]


def test_field_sizes_are_checked() -> None:
    runs = [[block([(b"k", 1, 1, bytes(16))])]]
    with pytest.raises(ValueError, match="1, 2, 4 or 8"):
        _speedups.runs_columns(runs, False, True, False, (8, 0))
    with pytest.raises(ValueError, match="1 to 64 fields"):
        _speedups.runs_columns(runs, False, True, False, ())
    with pytest.raises(TypeError, match="tuple"):
        _speedups.runs_columns(runs, False, True, False, [8])


# ---- a block's entries (``_speedups.block_entries``) ----------------------------------------


def walked(block: bytes) -> list[tuple[bytes, int, int]] | None:
    """The Python walk's entries of ``block``; None where it names damage."""
    try:
        return list(_walked_entries(block, "block"))
    except ParseError:
        return None


def test_every_block_of_every_table_has_the_entries_python_walks(
    tables: list[tuple[str, bytes]],
) -> None:
    """The metaindex, properties, index and data blocks of every SST of the samples and the
    corpus: the compiled walk reads each one, entry for entry what Python reads."""
    read = 0
    for name, data in tables:
        table = _Table(data, DEFAULT_LIMITS)
        handles = {n: (o, s) for n, o, s in table.meta_handles}
        blocks = [table.block(*table.metaindex), table.block(*table.index)]
        blocks.append(table.block(*handles[b"rocksdb.properties"]))
        blocks += python_blocks(data)
        for each in blocks:
            assert _speedups.block_entries(each) == walked(each), name
            read += 1
    assert read > 500


@st.composite
def prefix_blocks(draw: st.DrawFn) -> bytes:
    """A block of sorted keys, prefix-compressed between restart points every ``interval``
    entries, as RocksDB writes its index and properties blocks."""
    keys = sorted(set(draw(st.lists(st.binary(max_size=20), max_size=40))))
    interval = draw(st.integers(1, 17))
    out, restarts, before = bytearray(), [], b""
    for i, key in enumerate(keys):
        shared = 0
        if i % interval:
            while shared < min(len(key), len(before)) and key[shared] == before[shared]:
                shared += 1
        else:
            restarts.append(len(out))
        value = draw(st.binary(max_size=30))
        out += uvarint(shared) + uvarint(len(key) - shared) + uvarint(len(value))
        out += key[shared:] + value
        before = key
    restarts = restarts or [0]
    for at in restarts:
        out += struct.pack("<I", at)
    return bytes(out + struct.pack("<I", len(restarts)))


@settings(max_examples=400, deadline=None)
@given(prefix_blocks())
def test_a_block_has_the_entries_python_walks(block: bytes) -> None:
    assert _speedups.block_entries(block) == walked(block) is not None


@settings(max_examples=600, deadline=None)
@given(prefix_blocks(), st.data())
def test_a_damaged_block_is_refused_or_read_as_python_reads_it(
    block: bytes, data: st.DataObject
) -> None:
    """A changed byte or a cut anywhere: the compiled walk refuses (Python then names the
    damage, or reads what RocksDB's own longer varints allow), or reads what Python reads."""
    damaged = bytearray(block)
    if data.draw(st.booleans(), label="cut"):
        damaged = damaged[: data.draw(st.integers(0, len(block)), label="length")]
    else:
        at = data.draw(st.integers(0, len(block) - 1), label="byte")
        damaged[at] = data.draw(st.integers(0, 255), label="to")
    got = _speedups.block_entries(bytes(damaged))
    assert got is None or got == walked(bytes(damaged))
