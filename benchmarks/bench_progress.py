"""Ingest cost of a day of progress events: the event log of a 24-hour run at a 10 s trigger.

The log is synthesised from a real one (default: the zstd log Spark wrote for
``tests/parsers/data/eventlogs``): the events of each of its batches (jobs, stages, tasks, SQL
executions, then the progress event) are repeated with new batch ids and progress timestamps
10 s apart, until there are ``--events`` progress events (8,640 = 24 h / 10 s). It is written
the way Spark 4 writes by default: a rolling ``eventlog_v2_*`` directory of zstd files, one
zstd frame per event (zstd-jni ends a frame at each flush), rolled at ``--max-file-mb``
(``spark.eventLog.rolling.maxFileSize``, 128 MiB), with the application still running.

Measured: a full collect into an empty database; then, per new batch appended to the newest
file, the incremental collect (the tail), and a collect when nothing changed.

Usage::

    .venv/bin/python benchmarks/bench_progress.py               # 8,640 events
    .venv/bin/python benchmarks/bench_progress.py --events 1000 --keep /tmp/daylog
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stateglass.collectors.db.read import read_query  # noqa: E402
from stateglass.collectors.db.writer import Database  # noqa: E402
from stateglass.collectors.progress import ProgressCollector  # noqa: E402
from stateglass.parsers import eventlog  # noqa: E402
from stateglass.parsers.compression import decode_prefix  # noqa: E402

DEFAULT_LOG = ROOT / "tests" / "parsers" / "data" / "eventlogs" / "zstd"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def real_blocks(folder: Path) -> tuple[list[bytes], list[list[bytes]], str]:
    """The log's lines before its first batch, one list of lines per batch (ending with its
    progress event), and the app id."""
    events = next(p for p in folder.rglob("events_*"))
    app_id = events.parent.name[len(eventlog.ROLLING_DIR_PREFIX) :]
    lines = decode_prefix("zstd", events.read_bytes()).text.splitlines()
    head: list[bytes] = []
    blocks: list[list[bytes]] = []
    current: list[bytes] = []
    for line in lines:
        current.append(line)
        if eventlog.PROGRESS_EVENT.encode() in line:
            if not blocks and not head:
                head, current = current[:-1], current[-1:]
            blocks.append(current)
            current = []
    return head, blocks, app_id


def progress_line(line: bytes, batch_id: int) -> bytes:
    event = json.loads(line)
    event["progress"]["batchId"] = batch_id
    stamp = T0 + timedelta(seconds=10 * batch_id)
    event["progress"]["timestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return json.dumps(event, separators=(",", ":")).encode()


class RollingWriter:
    """Spark's rolling zstd layout, one frame per event."""

    def __init__(self, directory: Path, app_id: str, max_bytes: int) -> None:
        self.directory, self.app_id, self.max_bytes = directory, app_id, max_bytes
        self.index = 0
        self.size = 0
        self.cctx = zstandard.ZstdCompressor(level=1)  # Spark's default level
        directory.mkdir(parents=True)
        (directory / f"appstatus_{app_id}.inprogress").write_bytes(b"")
        self.handle = self._next()

    def _next(self):  # type: ignore[no-untyped-def]
        self.index += 1
        self.size = 0
        return (self.directory / f"events_{self.index}_{self.app_id}.zstd").open("ab")

    def write(self, line: bytes) -> None:
        if self.size >= self.max_bytes:
            self.handle.close()
            self.handle = self._next()
        frame = self.cctx.compress(line + b"\n")
        self.handle.write(frame)
        self.size += len(frame)

    def flush(self) -> None:
        self.handle.flush()


def synthesise(args: argparse.Namespace, target: Path) -> tuple[RollingWriter, list[list[bytes]]]:
    head, blocks, app_id = real_blocks(Path(args.log))
    writer = RollingWriter(
        target / f"{eventlog.ROLLING_DIR_PREFIX}{app_id}", app_id, args.max_file_mb << 20
    )
    for line in head:
        writer.write(line)
    for batch in range(args.events):
        block = blocks[batch % len(blocks)]
        for line in block[:-1]:
            writer.write(line)
        writer.write(progress_line(block[-1], batch))
    writer.flush()
    return writer, blocks


def timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=8640)
    parser.add_argument("--log", default=str(DEFAULT_LOG), help="folder with a real zstd log")
    parser.add_argument("--max-file-mb", type=int, default=128)
    parser.add_argument("--tails", type=int, default=5)
    parser.add_argument("--keep", default=None, help="write the log here and keep it")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-progress-"))
    shutil.rmtree(work, ignore_errors=True)
    logs = work / "eventlog"
    build_s, (writer, blocks) = timed(lambda: synthesise(args, logs))
    files = sorted(writer.directory.glob("events_*"))
    size = sum(f.stat().st_size for f in files)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(
        f"log: {args.events} progress events, {len(files)} file(s), {size / 2**20:.1f} MiB zstd "
        f"(built in {build_s:.1f} s)"
    )
    db = Database(str(work / "bench.duckdb"))
    collector = ProgressCollector(db)
    full_s, summary = timed(lambda: collector.collect(str(logs)))
    rows = read_query(db.path, "SELECT count(*) FROM progress")[0][0]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"full collect: {full_s:.2f} s for {summary.progress_events} events "
        f"({summary.progress_events / full_s:.0f} events/s), {rows} progress rows, "
        f"peak RSS {rss:.0f} MiB"
    )
    idle = [timed(lambda: collector.collect(str(logs)))[0] for _ in range(3)]
    print(f"collect, nothing new: median {statistics.median(idle) * 1000:.1f} ms")
    tails = []
    for n in range(args.tails):
        block = blocks[n % len(blocks)]
        for line in block[:-1]:
            writer.write(line)
        writer.write(progress_line(block[-1], args.events + n))
        writer.flush()
        seconds, summary = timed(lambda: collector.collect(str(logs)))
        assert summary.progress_events == 1, summary
        tails.append(seconds)
    print(
        f"incremental tail (one new batch appended to a {size / 2**20:.1f} MiB log): "
        f"median {statistics.median(tails) * 1000:.0f} ms over {len(tails)}"
    )
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
