"""Partition counts per batch as runs read in SQL answer as the recorded batches themselves do.

The reference is the plain definition over every recorded batch (what the rules computed before
the counts were kept as runs): a batch's own count, else the next recorded batch's, else the
default; a partition's last batch is the newest recorded one up to ``last`` that has it.
"""

from __future__ import annotations

from datetime import datetime

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.app.analysis.health.base import Context
from stateglass.app.analysis.health.versions import PartitionCounts
from stateglass.app.analysis.thresholds import HealthConfig

CP = "/cp"


def _at(by_batch: dict[int, int], default: int, batch: int) -> int:
    if batch in by_batch:
        return by_batch[batch]
    later = [b for b in by_batch if b > batch]
    return by_batch[min(later)] if later else default


def _last_batch_of(by_batch: dict[int, int], default: int, partition: int, last: int) -> int | None:
    for batch in sorted((b for b in by_batch if b <= last), reverse=True):
        if partition < by_batch[batch]:
            return batch
    return last if partition < default else None


# Recorded batches with gaps (purged or unreadable offsets) and a few repartitions.
HISTORIES = st.dictionaries(st.integers(0, 40), st.sampled_from([2, 3, 5]), max_size=30)


@settings(max_examples=60, deadline=None)
@given(by_batch=HISTORIES, default=st.sampled_from([0, 3, 4]))
def test_runs_answer_as_every_batch_does(by_batch: dict[int, int], default: int) -> None:
    with duckdb.connect() as conn:
        conn.execute(
            "CREATE TABLE batches (checkpoint VARCHAR, batch_id BIGINT, shuffle_partitions INT)"
        )
        if by_batch:
            conn.executemany(
                "INSERT INTO batches VALUES (?, ?, ?)", [(CP, b, n) for b, n in by_batch.items()]
            )
        conn.execute("INSERT INTO batches VALUES ('/other', 3, 7)")
        ctx = Context(conn, CP, datetime(2026, 1, 1), HealthConfig())
        counts = PartitionCounts.of(ctx, default)
    assert counts.most() == max([default, *by_batch.values()])
    for batch in range(-1, 43):
        assert counts.at(batch) == _at(by_batch, default, batch), batch
    for last in range(-1, 43):
        for partition in range(6):
            want = _last_batch_of(by_batch, default, partition, last)
            got = counts.last_batch_of(partition, last)
            # A run's batches are taken as recorded: a batch missing inside a run answers as
            # the run's newest recorded batch up to ``last`` would.
            if want is not None and got is not None and want != got:
                assert not any(b in by_batch for b in range(want + 1, got + 1)), (last, partition)
            else:
                assert got == want, (last, partition)
