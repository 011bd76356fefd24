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
after ``L`` (a compact file after ``L`` lists later batches). When the source lacks a file
Spark would read (deleted after a later compaction: by Spark, with a smaller
``minBatchesToRetain`` than when it ran, or by hand), the log is written instead as one file,
``L.compact``, holding every entry up to ``L`` as the newest compact file after ``L`` lists
them (each line as Spark wrote it, with its own ``batchId``): from one compact file ``C``
Spark derives an interval that divides ``C + 1``, so it reads ``L.compact`` alone whatever its
``compactInterval``.

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
            kept = {
                name: cp.fs.read(path) for name, path in files.items() if up_to_batch(name, batch)
            }
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


def up_to_batch(name: str, batch: int) -> bool:
    """A log file of a batch up to ``batch``, or a file that is no batch's (kept)."""
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
    kept = {name: read(path) for name, path in files.items() if batch_id_of(name) is None}
    if log_batch < 0:
        return kept
    interval = compact_interval([b for b, n in by_batch.items() if n.endswith(COMPACT_SUFFIX)])
    needed = [_log_name(b, interval) for b in valid_batches(log_batch, interval)]
    if all(name in files for name in needed):
        return kept | {name: read(files[name]) for b, name in by_batch.items() if b <= log_batch}
    kept[_log_name(log_batch, 1)] = _compacted(files, by_batch, log_batch, read)
    return kept


def _log_name(batch: int, interval: int) -> str:
    """The name Spark gives ``batch``'s log file (``batchIdToPath``)."""
    return f"{batch}{COMPACT_SUFFIX}" if is_compaction_batch(batch, interval) else str(batch)


def _compacted(
    files: Mapping[str, str],
    by_batch: Mapping[int, str],
    log_batch: int,
    read: Callable[[str], bytes],
) -> bytes:
    """``<log_batch>.compact``: every entry up to ``log_batch``, as the newest compact file
    after it lists them (each line as Spark wrote it). A log of that one compact file reads
    whatever interval Spark derives from it: one compact file ``C`` gives an interval that
    divides ``C + 1``, so ``C`` is a compaction batch and Spark reads it alone."""
    newest = max(
        (b for b, n in by_batch.items() if n.endswith(COMPACT_SUFFIX) and b > log_batch),
        default=None,
    )
    if newest is None:
        where = os.path.dirname(next(iter(files.values()), "")) or "sources"
        why = f"the file source log lacks files up to its batch {log_batch}, and no later "
        raise RewriteRefused(where, why + "compact file holds their entries")
    version, *entries = split_lines(read(files[by_batch[newest]]).decode("utf-8"))
    lines = [
        line for line in entries if line.strip() and int(json.loads(line)["batchId"]) <= log_batch
    ]
    return "\n".join([version, *lines]).encode("utf-8")
