"""The sources' own logs (``sources/<id>/``) of a rewrite's destination, cut at batch ``B``.

A file source's offset in ``offsets/B`` is a batch ``L`` of its own log (``{"logOffset": L}``),
not the query's batch: a batch that read no new file (a watermark's batch without data, an
idle source of a union) leaves the log where it was. So the log is cut at ``L``: a restart
on the destination sees every file of log batches up to ``L`` as read (``seenFiles``) and
reads the files of later log batches again, as new files, in batch ``B + 1`` on.

Spark reads the log up to ``L`` as ``CompactibleFileStreamLog.getAllValidBatches(L)``: the
compaction batch at or below ``L`` (``C.compact``: every entry up to ``C``) and the batch
files ``C+1..L``; which batches compact follows the interval Spark derives from the compact
files present. Every file of the log whose batch is at most ``L`` is copied as it is; none
after ``L`` (a compact file after ``L`` lists later batches). A file Spark reads and the
source lacks (Spark deleted it after a later compaction) is written from the entries of the
newest compact file: each entry keeps its own ``batchId`` line as Spark wrote it, and only
those up to the file's batch are written.

Kafka and rate sources keep one file in their log (``0``: the start offsets, the start
time): copied. A source whose offset is not known: its log files of batches up to ``B``.

Example::

    for rel, data in source_log_files(Checkpoint.open("/data/cp"), 41):
        write(rel, data)   # rel: ("sources", "0", "3.compact")
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.errors import RewriteRefused
from stateglass.parsers.logs import (
    COMPACT_SUFFIX,
    batch_id_of,
    is_compaction_batch,
    split_lines,
    valid_batches,
)
from stateglass.parsers.offsets import FILE_LOG, offset_position

# spark.sql.streaming.fileSource.log.compactInterval: Spark's default, what it uses for a log
# without a compact file (the conf is not pinned in offsets/).
DEFAULT_COMPACT_INTERVAL = 10


def source_log_files(cp: Checkpoint, batch: int) -> Iterator[tuple[tuple[str, ...], bytes]]:
    """``(path relative to the checkpoint, bytes)`` of every file of ``sources/`` the
    destination keeps when it ends at ``batch`` (module docstring)."""
    if not cp.fs.is_dir(cp.path("sources")):
        return
    log_offsets = file_log_offsets(cp, batch)
    for info in cp.list_dir("sources"):
        if not info.is_dir or info.name.startswith("."):
            continue
        files = {
            f.name: cp.path("sources", info.name, f.name)
            for f in cp.list_dir("sources", info.name)
            if not f.is_dir and not f.name.startswith(".")
        }
        source = info.name
        if source in log_offsets:
            kept = cut_file_log(files, log_offsets[source], cp.fs.read)
        else:
            kept = {name: cp.fs.read(path) for name, path in files.items() if _up_to(name, batch)}
        for name, data in sorted(kept.items()):
            yield ("sources", source, name), data


def file_log_offsets(cp: Checkpoint, batch: int) -> dict[str, int]:
    """Source id -> the batch of its own log that ``offsets/batch`` stands at, for each file
    source; ``-1`` for a file source whose offset there is void (no file read yet: the newest
    offsets entry says it is a file source)."""
    newest = cp.offsets(cp.offset_batch_ids[-1]).sources if cp.offset_batch_ids else ()
    file_sources = {s.source_id for s in newest if _log_offset(s.offset_json) is not None}
    out: dict[str, int] = {}
    for source in cp.offsets(batch).sources:
        found = _log_offset(source.offset_json)
        if found is not None:
            out[source.source_id] = found
        elif source.offset_json is None and source.source_id in file_sources:
            out[source.source_id] = -1
    return out


def _log_offset(offset_json: str | None) -> int | None:
    position = offset_position(offset_json) if offset_json is not None else None
    return int(position[0]) if position is not None and position[1] == FILE_LOG else None


def _up_to(name: str, batch: int) -> bool:
    found = batch_id_of(name)
    return found is None or found <= batch


def compact_interval(compact_ids: list[int], default: int = DEFAULT_COMPACT_INTERVAL) -> int:
    """The interval Spark derives from a log's compact files (``CompactibleFileStreamLog
    .compactInterval``): the distance of the two newest; from one, the smallest divisor of
    ``id + 1`` that is at least ``default``; ``default`` without any."""
    ids = sorted(compact_ids, reverse=True)
    if len(ids) >= 2:
        return ids[0] - ids[1]
    if not ids:
        return default
    n = ids[0] + 1
    if n <= default or default >= n // 2:
        return n
    return next((i for i in range(default, n // 2 + 1) if n % i == 0), n)


def cut_file_log(
    files: Mapping[str, str], log_batch: int, read: Callable[[str], bytes]
) -> dict[str, bytes]:
    """The files of one file source's log (name -> path in ``files``) that a destination
    ending at log batch ``log_batch`` keeps: name -> bytes (module docstring)."""
    by_batch = {b: name for name in files if (b := batch_id_of(name)) is not None}
    kept = {name: read(files[name]) for name in files if by_batch_of(name) <= log_batch}
    if log_batch < 0:
        return kept
    compacts = [b for b, name in by_batch.items() if name.endswith(COMPACT_SUFFIX)]
    interval = compact_interval(compacts)
    for b in valid_batches(log_batch, interval):
        name = f"{b}{COMPACT_SUFFIX}" if is_compaction_batch(b, interval) else str(b)
        if name not in kept:
            kept[name] = _entries_up_to(files, by_batch, b, name, read)
    return kept


def by_batch_of(name: str) -> int:
    """The batch of a log file name; a name that is no batch file sorts before every batch
    (it is kept)."""
    found = batch_id_of(name)
    return -1 if found is None else found


def _entries_up_to(
    files: Mapping[str, str],
    by_batch: Mapping[int, str],
    batch: int,
    name: str,
    read: Callable[[str], bytes],
) -> bytes:
    """Log file ``name`` of ``batch`` written from the newest compact file after it: its
    entries of ``batch`` (a compact name: of every batch up to ``batch``)."""
    newest = max(
        (b for b, n in by_batch.items() if n.endswith(COMPACT_SUFFIX) and b > batch), default=None
    )
    if newest is None:
        where = os.path.dirname(next(iter(files.values()), "")) or "sources"
        raise RewriteRefused(
            where,
            f"the file source log has no {name} and no later compact file holds its entries",
        )
    version, *entries = split_lines(read(files[by_batch[newest]]).decode("utf-8"))
    compact = name.endswith(COMPACT_SUFFIX)
    lines = [
        line
        for line in entries
        if line.strip()
        and (
            (entry_batch := int(json.loads(line)["batchId"])) == batch
            or (compact and entry_batch <= batch)
        )
    ]
    return "\n".join([version, *lines]).encode("utf-8")
