"""Which clock says when a batch ran: the files' times, or Spark's own ``batchTimestampMs``.

Spark reads its trigger clock into ``batchTimestampMs`` and writes ``offsets/N`` moments later
(after asking the sources for their latest offsets), so on a checkpoint Spark wrote, each
offsets file's time follows its batch time by a near-constant lag: the write latency plus
the skew between the driver's clock and the storage's. A checkpoint copied (``cp -r``,
``aws s3 cp``, a git clone, a restore without times) gets file times of the copy: files
written within seconds for batches minutes apart, or long after (or before) Spark's times.
Then every age and duration made of file times is the copy's, not the query's, and the pages,
``check``, the reports and the rules use Spark's clock alone.

The rule (:func:`judge_file_times`) is pure and compares differences, so a constant clock
skew does not count against a checkpoint; it reads the newest :data:`NEWEST` batches, as
many as Spark keeps by default, so a checkpoint copied once and then run again is trusted
again when its copied batches are purged. Spark's commit log holds no time (only
``nextBatchWatermarkMs``, and ``stateUniqueIds`` on 4.x), so ``batchTimestampMs`` is the one
clock of Spark's in a checkpoint.

Example::

    verdict = file_times(conn, "/data/checkpoints/orders")
    if not verdict.trusted:
        print(verdict.note)   # "file times look copied and are not used: ..."
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from stateglass.parsers.units import fmt_age, fmt_duration

if TYPE_CHECKING:
    import duckdb

# How far one batch's offsets file may lag its batch time more than the others' do: the
# sources' latest offsets and the write itself (a slow Kafka or object store takes seconds).
JITTER_S = 60.0
# How far the storage's clock may be from the driver's (both NTP-synchronised in practice).
SKEW_S = 300.0
# Spark's default spark.sql.streaming.minBatchesToRetain: the batches a checkpoint keeps.
NEWEST = 100

COPIED = "file times look copied and are not used"
# What the rules that ask "is the query running?" say on a copy instead of judging.
NOT_ON_COPY = "not judged, no query writes to a copy"


@dataclass(frozen=True)
class FileTimes:
    """Whether a checkpoint's file times follow Spark's batch times, and why not."""

    trusted: bool
    why: str = ""  # the numbers behind an untrusted verdict

    @property
    def note(self) -> str:
        """The one sentence pages and ``check`` show for an untrusted checkpoint ("" else)."""
        if self.trusted:
            return ""
        return f"{COPIED}: {self.why}; ages and stalls use Spark's batchTimestampMs"


TRUSTED = FileTimes(True)

# (batchTimestampMs, offsets file time, commit file time), times in epoch seconds
BatchTimes = tuple[int | None, float | None, float | None]


def judge_file_times(rows: Sequence[BatchTimes]) -> FileTimes:
    """Trusted unless the offsets files' times stray from Spark's batch times by more than a
    write's jitter around their usual lag, that lag is beyond clock skew, or a batch's
    commit is older than its own offsets file. Order of ``rows`` does not matter."""
    pairs = [(ts / 1000, off, com) for ts, off, com in rows if ts and off is not None]
    if not pairs:
        return TRUSTED
    lags = [off - ts for ts, off, _ in pairs]
    usual = statistics.median(lags)
    if abs(usual) > SKEW_S:
        side = "after" if usual > 0 else "before"
        return FileTimes(
            False,
            f"offsets files were written {fmt_duration(abs(usual))} {side} Spark's batch "
            f"times (median of {len(pairs)} batches)",
        )
    spread = max(abs(lag - usual) for lag in lags)
    if spread > JITTER_S:
        times = [ts for ts, _, _ in pairs]
        files = [off for _, off, _ in pairs]
        return FileTimes(
            False,
            f"{len(pairs)} batches {fmt_duration(max(times) - min(times))} apart on Spark's "
            f"clock have offsets files {fmt_duration(max(files) - min(files))} apart",
        )
    early = [ts for ts, off, com in pairs if com is not None and com < off - JITTER_S]
    if early:
        return FileTimes(
            False, f"{len(early)} commit files are older than their batches' offsets files"
        )
    return TRUSTED


def spark_time(ms: int) -> datetime:
    """``batchTimestampMs`` as a naive UTC moment, like every timestamp in the database."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).replace(tzinfo=None)


def batch_ran(batch: int, ms: int | None, now: datetime) -> str:
    """``batch 11 ran 27m 0s ago (2024-01-01 00:40:23 UTC, Spark's batchTimestampMs)``."""
    if not ms:
        return f"batch {batch}, which carries no batch timestamp"
    at = spark_time(ms)
    age = fmt_age((now - at).total_seconds())
    return f"batch {batch} ran {age} ({at:%Y-%m-%d %H:%M:%S} UTC, Spark's batchTimestampMs)"


# The rows :func:`judge_file_times` takes, of one checkpoint (``?``) in the history database.
FILE_TIMES_SQL = f"""
    SELECT batch_timestamp_ms, epoch(offsets_written_at), epoch(committed_at)
    FROM batches WHERE checkpoint = ? ORDER BY batch_id DESC LIMIT {NEWEST}
"""


def file_times(conn: duckdb.DuckDBPyConnection, checkpoint: str) -> FileTimes:
    """:func:`judge_file_times` on the newest batches the history database holds."""
    rows = conn.execute(FILE_TIMES_SQL, [checkpoint]).fetchall()
    return judge_file_times([(ts, off, com) for ts, off, com in rows])
