"""Hostile and damaged copies of real checkpoints, and a way to measure a CLI run's peak memory
and temporary bytes (shared by the damage tests and ``benchmarks/bench_hostile.py``)."""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import lz4.block
import xxhash

from stateglass.parsers.compression import decompress
from stateglass.parsers.compression.lz4 import (
    CHECKSUM_MASK,
    HEADER,
    MAGIC,
    METHOD_LZ4,
    METHOD_RAW,
    XXH32_SEED,
)
from tests.conftest import ROOT, SAMPLES, copy_checkpoint

__all__ = ["ROOT", "SAMPLES"]

# spark.io.compression.lz4.blockSize (default 32 KiB, any power of two up to 32 MiB): with
# 1 MiB blocks a 64-byte record repeated to 1 GiB takes ~4 MiB.
BLOCK_SIZE = 1 << 20
BLOCK_LEVEL = 10  # block size = 1 << (10 + level)
GIB = 1 << 30
# The bounds docs/limits.md promises for a refused or damaged file, whatever the command: peak
# RSS (interpreter, DuckDB and pyarrow included) and bytes under TMPDIR.
MAX_RSS = 300 << 20
MAX_TMP = 1 << 20


def copy_sample(name: str, dst: Path, version: str = "spark-4.3") -> Path:
    """A private copy of the real PySpark-written sample ``version/name``."""
    return copy_checkpoint(SAMPLES / version / name, dst / name)


def blocked_on_fifo(pid: int) -> bool:
    """Whether ``pid`` or a child of it is blocked opening a FIFO that has no writer (the
    kernel's ``wait_for_partner``): a reader certainly mid-read, not merely started."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            waiting = Path(f"/proc/{entry}/wchan").read_text().strip() == "wait_for_partner"
            if waiting and pid in (int(entry), parent):
                return True
        except (OSError, ValueError, IndexError):  # the process ended meanwhile
            continue
    return False


def store_files(cp: Path, suffix: str, op: int = 0, part: int = 0) -> list[Path]:
    """The files of store partition ``op/part`` ending in ``suffix``, by version."""
    return sorted(
        (p for p in (cp / "state" / str(op) / str(part)).iterdir() if p.name.endswith(suffix)),
        key=lambda p: int(p.name.split(".")[0].split("_")[0]),
    )


def delta_without_snapshot(cp: Path, op: int = 0, part: int = 0) -> Path:
    """The newest delta whose version has no snapshot: reading that version must decode it."""
    snaps = {int(p.name.split(".")[0]) for p in store_files(cp, ".snapshot", op, part)}
    return next(
        p
        for p in reversed(store_files(cp, ".delta", op, part))
        if int(p.name.split(".")[0]) not in snaps
    )


def after_last_commit(cp: Path, seconds: float = 5) -> str:
    """An ISO time just after the last commit: judged then, a copy is not a stalled query."""
    mtime = (cp / "commits" / str(last_batch(cp))).stat().st_mtime
    return datetime.fromtimestamp(mtime + seconds, tz=UTC).isoformat()


def last_batch(cp: Path) -> int:
    return max(int(p.name) for p in (cp / "commits").iterdir() if p.name.isdigit())


def lz4_block(payload: bytes, level: int = BLOCK_LEVEL) -> bytes:
    """One block as lz4-java's ``LZ4BlockOutputStream`` frames it (what Spark writes)."""
    check = xxhash.xxh32_intdigest(payload, XXH32_SEED) & CHECKSUM_MASK
    packed = lz4.block.compress(payload, store_size=False)
    return HEADER.pack(MAGIC, METHOD_LZ4 | level, len(packed), len(payload), check) + packed


def lz4_end(level: int = BLOCK_LEVEL) -> bytes:
    return HEADER.pack(MAGIC, METHOD_RAW | level, 0, 0, 0)


def lz4_bomb(records: bytes, size: int = GIB) -> bytes:
    """Valid 32 KiB LZ4 blocks of ``records`` repeated to ``size`` bytes, then a -1 end marker.

    ``records`` is a real file's record stream without its end marker, so every block decodes
    and the stream is made of well-formed records: only its size is hostile.
    """
    out = io.BytesIO()
    cache: dict[bytes, bytes] = {}
    period = len(records)
    reps = (BLOCK_SIZE + period - 1) // period + 1
    pattern = records * reps
    written = 0
    while written < size:
        offset = written % period
        n = min(BLOCK_SIZE, size - written)
        payload = pattern[offset : offset + n]
        block = cache.get(payload)
        if block is None:
            block = cache.setdefault(payload, lz4_block(payload))
        out.write(block)
        written += n
    out.write(lz4_block(struct.pack(">i", -1)))
    out.write(lz4_end())
    return out.getvalue()


def first_record(delta: Path) -> bytes:
    """The first record (a real key and value) of a real delta, as its bytes in the stream."""
    data = decompress("lz4", delta.read_bytes())
    key_size = struct.unpack_from(">i", data, 0)[0]
    value_size = struct.unpack_from(">i", data, 4 + key_size)[0]
    assert key_size > 0 and value_size > 0
    return data[: 8 + key_size + value_size]


def _deflate_zeros(size: int) -> tuple[bytes, int]:
    """Raw deflate of ``size`` zero bytes, and their CRC-32, in about a second for 1 GiB.

    A full flush after each MiB aligns the output and resets the window, so every MiB
    compresses to the same bytes: compress one and repeat it.
    """
    mib = bytes(1 << 20)
    enc = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = enc.compress(mib) + enc.flush(zlib.Z_FULL_FLUSH)
    count, rest = divmod(size, len(mib))
    assert rest == 0
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(mib, crc)
    tail = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)
    return piece * count + tail, crc


def _zip(entries: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip of ``(name, raw deflate data, crc32, uncompressed size)`` entries (no zip64)."""
    out = io.BytesIO()
    central = []
    for name, data, crc, usize in entries:
        offset = out.tell()
        raw = name.encode()
        # version 20, no flags, deflate, 1980-01-01 00:00
        fields = (20, 0, 8, 0, 0x21, crc, len(data), usize, len(raw), 0)
        out.write(struct.pack("<I5H3I2H", 0x04034B50, *fields) + raw + data)
        central.append(struct.pack("<I6H3I5HII", 0x02014B50, 20, *fields, 0, 0, 0, 0, offset) + raw)
    start = out.tell()
    directory = b"".join(central)
    out.write(directory)
    out.write(
        struct.pack(
            "<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), len(directory), start, 0
        )
    )
    return out.getvalue()


def zip_bomb(real_zip: Path, entry_size: int = GIB) -> bytes:
    """A copy of a real RocksDB checkpoint zip whose WAL ``.log`` entry inflates to
    ``entry_size`` zero bytes (~1 MiB for 1 GiB)."""
    entries = []
    with zipfile.ZipFile(real_zip) as src:
        for info in src.infolist():
            if info.filename.endswith(".log"):
                data, crc = _deflate_zeros(entry_size)
                entries.append((info.filename, data, crc, entry_size))
            else:
                content = src.read(info.filename)
                enc = zlib.compressobj(6, zlib.DEFLATED, -15)
                packed = enc.compress(content) + enc.flush()
                entries.append((info.filename, packed, zlib.crc32(content), len(content)))
    return _zip(entries)


def sst_bomb(path: Path, blocks: int, block_bytes: int, compression: str = "lz4") -> Path:
    """A real SST written by RocksDB (``SstFileWriter``, ``format_version`` 5 as Spark writes)
    of ``blocks`` data blocks, each one value of ``block_bytes`` zero bytes: LZ4 keeps about
    1/255 of it, ZSTD far less. 1024 blocks of 1 MiB in LZ4: ~4 MiB on disk, 1 GiB inside,
    written in half a second."""
    import rocksdict

    options = rocksdict.Options(raw_mode=True)
    options.set_compression_type(getattr(rocksdict.DBCompressionType, compression)())
    table = rocksdict.BlockBasedOptions()
    table.set_format_version(5)
    table.set_block_size(block_bytes)  # one value a block
    options.set_block_based_table_factory(table)
    writer = rocksdict.SstFileWriter(options=options)
    writer.open(str(path))
    value = bytes(block_bytes)
    for n in range(blocks):
        writer[b"bomb%08d" % n] = value
    writer.finish()
    return path


def ingest_sst(cp: Path, sst: Path, op: int = 0, part: int = 0) -> Path:
    """Make ``sst`` part of the newest RocksDB version of store partition ``op/part``, as a
    flush of Spark's would have: that version's zip and SSTs restored, the table ingested by
    RocksDB itself (so its MANIFEST names it), and the zip written back with the new MANIFEST
    and a ``metadata`` listing the new SST. Returns the SST's path under ``SSTs/``."""
    import rocksdict

    zip_path = store_files(cp, ".zip", op, part)[-1]
    ssts = zip_path.parent / "SSTs"
    work = cp.parent / f"ingest-{zip_path.stem}"
    work.mkdir()
    with zipfile.ZipFile(zip_path) as src:
        head, _, body = src.read("metadata").decode().partition("\n")
        src.extractall(work, [n for n in src.namelist() if n != "metadata"])
    meta = json.loads(body)
    dfs = {f["localFileName"]: f["dfsSstFileName"] for f in meta["sstFiles"]}
    for local, name in dfs.items():
        shutil.copyfile(ssts / name, work / local)
    options = rocksdict.Options(raw_mode=True)
    options.set_disable_auto_compactions(True)  # the version keeps its own SSTs
    db = rocksdict.Rdict(str(work), options=options, column_families={"default": options})
    db.ingest_external_file([str(sst)])
    db.close()
    added = [p for p in work.glob("*.sst") if p.name not in dfs]
    assert len(added) == 1, added
    dfs[added[0].name] = f"{added[0].stem}-{uuid.uuid4()}.sst"
    shutil.copyfile(added[0], ssts / dfs[added[0].name])
    meta["sstFiles"] = [
        {"localFileName": local, "dfsSstFileName": name, "sizeBytes": (work / local).stat().st_size}
        for local, name in sorted(dfs.items())
    ]
    # What Spark zips of a RocksDB instance: its current MANIFEST and OPTIONS, and the WAL.
    manifest = (work / "CURRENT").read_text().strip()
    newest = max(p.name for p in work.glob("OPTIONS-*"))
    keep = {"CURRENT", manifest, newest} | {p.name for p in work.glob("*.log")}
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as out:
        for name in sorted(keep):
            out.write(work / name, name)
        out.writestr("metadata", f"{head}\n{json.dumps(meta)}")
    (zip_path.parent / f".{zip_path.name}.crc").unlink(missing_ok=True)
    shutil.rmtree(work)
    return ssts / dfs[added[0].name]


def peak_allocation(call: Callable[[], object]) -> int:
    """The most bytes Python held allocated at once while ``call`` ran (``tracemalloc``: the
    decoders' output buffers are Python objects)."""
    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@dataclass(frozen=True)
class Run:
    """A finished CLI run: exit status, output, peak RSS (bytes), peak temporary bytes."""

    returncode: int
    stdout: str
    stderr: str
    peak_rss: int
    peak_tmp: int
    seconds: float


def _tree_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
    return total


# Runs argv[2:] as its child and writes the child's (and its waited workers') peak RSS in KiB
# to argv[1]; exits with the child's status.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def run_measured(*args: str, tmpdir: Path, timeout: float = 120) -> Run:
    """Run ``stateglass ARGS`` with ``TMPDIR=tmpdir``; measure its peak RSS and temp bytes.

    Peak RSS is the kernel's high-water mark of the child (and of any worker it waited for),
    from ``wait4``; temporary bytes are sampled every 5 ms while it runs.
    """
    tmpdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    out_path, err_path = tmpdir.parent / "run.stdout", tmpdir.parent / "run.stderr"
    start = time.monotonic()
    rss_path = tmpdir.parent / "run.maxrss"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        # Through a small launcher: Linux carries a forking parent's RSS high-water mark over
        # exec, so a child forked straight from a 400 MiB pytest would report >= 400 MiB.
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _LAUNCHER,
                str(rss_path),
                sys.executable,
                "-m",
                "stateglass.app.cli",
                *args,
            ],
            stdout=out,
            stderr=err,
            env=env,
            cwd=ROOT,
        )
    peak_tmp = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_tmp
        while not done.is_set():
            peak_tmp = max(peak_tmp, _tree_bytes(tmpdir))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
        done.set()
        sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(
        returncode=proc.returncode,
        stdout=out_path.read_text(),
        stderr=err_path.read_text(),
        peak_rss=int(rss_path.read_text()) * 1024 if rss_path.exists() else usage.ru_maxrss * 1024,
        peak_tmp=peak_tmp,
        seconds=time.monotonic() - start,
    )
