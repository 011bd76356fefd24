"""What verifying checksums costs `collect` (Hadoop ``.NAME.crc``, Spark ``NAME.crc``, and
RocksDB's own block checksums in SSTs).

Usage::

    .venv/bin/python benchmarks/bench_checksums.py CHECKPOINT [CHECKPOINT ...] [--runs 3]

For each checkpoint (read only: databases go to a temporary directory):

1. Verification alone: :func:`collectors.scan.checksums.verify_files` over every file a first
   collect sees (state files, SSTs, offsets/commits), timed; MB/s = bytes of the verified
   files / seconds.
2. RocksDB SSTs alone: each SST read and its block checksums re-computed
   (:func:`parsers.sst.verify_sst`), timed; MB/s = SST bytes / seconds (what an object store
   collect pays besides the GET of each new SST).
3. A full ``collect`` into a fresh database with verification, and one with it switched off,
   alternating, ``--runs`` times each; the medians and their ratio. ``--as-object-store``
   ignores the sidecars, as on an object store, where SSTs get only their block checksums
   verified (with sidecars, a matching one stands for the SST's blocks).

The figures go to stdout as Markdown with the machine, the load average and the date, ready
for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable

from stateglass.app.collecting import new_scanner
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.listing import list_checkpoint
from stateglass.collectors.scan import checksums
from stateglass.collectors.scan import scanner as scan_module
from stateglass.collectors.scan.checksums import is_sst, verify_files
from stateglass.collectors.scan.scanner import _read_metadata
from stateglass.parsers.sst import verify_sst


def _files(path: str) -> dict[str, int]:
    cp = Checkpoint.open(path)
    stores, _ = _read_metadata(cp, scan_module.ProblemLog(cp.root, dt.datetime.now()))
    listing = list_checkpoint(cp, stores, {})
    sizes = {p: f.stat.size for p, f in listing.state_files.items()}
    sizes.update({p: s.size for p, s in listing.log_files.items()})
    return sizes


def _verify_alone(path: str) -> tuple[int, int, float, int]:
    files = _files(path)
    size = sum(files.values())
    checked = sum(
        1
        for f in files
        if os.path.exists(os.path.join(os.path.dirname(f), f".{os.path.basename(f)}.crc"))
    )
    start = time.perf_counter()
    bad = verify_files(Checkpoint.open(path).fs, files)
    return len(files), size, time.perf_counter() - start, checked - len(bad)


def _verify_ssts(path: str) -> tuple[int, int, float]:
    """(SSTs, bytes, seconds) to read every SST and verify its blocks."""
    ssts = [f for f in _files(path) if is_sst(f)]
    start = time.perf_counter()
    size = 0
    for f in ssts:
        with open(f, "rb") as fh:
            data = fh.read()
        size += len(data)
        verify_sst(data)
    return len(ssts), size, time.perf_counter() - start


def _collect(path: str, verify: bool) -> float:
    original: Callable[..., None] = scan_module._verify_checksums
    if not verify:
        scan_module._verify_checksums = lambda seen: None  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            new_scanner(os.path.join(tmp, "b.duckdb")).scan(path)
            return time.perf_counter() - start
    finally:
        scan_module._verify_checksums = original  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--as-object-store", action="store_true")
    args = parser.parse_args()
    if args.as_object_store:
        checksums._sidecar_mismatch = lambda fs, path, size: (None, False)  # type: ignore[assignment]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.machine()}, {os.cpu_count()} cores"
    mode = " (sidecars ignored, as on an object store)" if args.as_object_store else ""
    print(f"Machine: {machine}, Python {platform.python_version()}; {now}{mode}")
    print()
    print(
        "| checkpoint | files (with a sidecar) | MB | verify alone | MB/s | SSTs | SST MB | "
        "SSTs alone | SST MB/s | collect with | without | ratio | load (1 min) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in args.checkpoints:
        load = os.getloadavg()[0]
        files, size, seconds, verified = _verify_alone(path)
        ssts, sst_size, sst_seconds = _verify_ssts(path)
        sst_rate = f"{sst_size / 1e6 / sst_seconds:.0f}" if ssts else "—"
        with_, without = [], []
        for _ in range(args.runs):
            with_.append(_collect(path, True))
            without.append(_collect(path, False))
        w, wo = statistics.median(with_), statistics.median(without)
        load = max(load, os.getloadavg()[0])
        print(
            f"| {path} | {files} ({verified}) | {size / 1e6:.1f} | {seconds:.2f} s | "
            f"{size / 1e6 / seconds:.0f} | {ssts} | {sst_size / 1e6:.1f} | {sst_seconds:.2f} s | "
            f"{sst_rate} | {w:.2f} s | {wo:.2f} s | {w / wo:.2f}x | {load:.1f} |"
        )


if __name__ == "__main__":
    main()
