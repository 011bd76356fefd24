"""The SQL the app writes for users runs on the real catalog of every sample checkpoint: each
example of the SQL page, and each page's link query (the state leak's keys older than the
watermark for every audited store)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stateglass.app import sql_examples
from stateglass.app.dashboard.views.sql import _retained
from stateglass.app.queries.eviction import newest_watermarks
from stateglass.collectors.catalog import SqlSession
from stateglass.collectors.catalog.names import schema_names
from stateglass.collectors.db.read import read_query
from tests.conftest import SamplesDb


@pytest.fixture(scope="module")
def roots(all_samples_db: SamplesDb) -> list[str]:
    return [
        r[0]
        for r in read_query(all_samples_db.path, "SELECT checkpoint FROM checkpoints ORDER BY 1")
    ]


@pytest.fixture(scope="module")
def session(all_samples_db: SamplesDb, roots: list[str]) -> Iterator[SqlSession]:
    with SqlSession(roots, history=all_samples_db.path, copy_history=True) as opened:
        yield opened


def test_every_example_of_every_sample_runs(session: SqlSession, roots: list[str]) -> None:
    tables = session.tables()
    titles: list[str] = []
    for checkpoint in roots:
        mine = [t for t in tables if t.checkpoint == checkpoint]
        found = sql_examples.examples(
            mine, lambda t: session.columns(t.schema, t.table), _retained(session, mine)
        )
        for example in found:
            session.execute(example.sql, max_rows=5)  # a bad example raises here
        titles += [e.title for e in found]
    # Each kind of question is asked somewhere in the samples.
    for kind in (
        "the 20 biggest values",
        "keys not updated since batch",
        "keys added between batch",
        "list size per key",
        "map size per key",
        "join: both sides, key by key",
        "rows per partition",
    ):
        assert any(kind in t for t in titles), kind


def test_keys_added_between_two_batches_are_the_difference_of_their_keys(
    session: SqlSession,
) -> None:
    [meta] = session.execute("SELECT * FROM purged_history.state_metadata").table.to_pylist()
    first, last = meta["minBatchId"], meta["maxBatchId"]
    mine = [t for t in session.tables() if t.schema == "purged_history"]
    (added,) = [
        e
        for e in sql_examples.examples(
            mine, lambda t: session.columns(t.schema, t.table), _retained(session, mine)
        )
        if "keys added" in e.title
    ]
    got = {str(k) for k in session.execute(added.sql).table.column("key").to_pylist()}

    def keys(batch: int) -> set[str]:
        rows = session.execute(
            f"SELECT key FROM purged_history.op0_default WHERE batch_id = {batch}"
        )
        return {str(k) for k in rows.table.column("key").to_pylist()}

    assert got == keys(last) - keys(first) and got


def test_the_leak_query_finds_what_the_eviction_audit_counted(
    session: SqlSession, samples_db: str, roots: list[str]
) -> None:
    """At the audited watermark the query's rows are the audit's overdue keys (none: Spark
    evicted them); with a watermark a year later, every key the audit saw is overdue."""
    schemas = schema_names(roots)
    year_ms = 366 * 24 * 3600 * 1000
    ran = 0
    for checkpoint in roots:
        for row in newest_watermarks(samples_db, checkpoint).itertuples():
            target = sql_examples.leak_target(row.kind, row.event_time_field or "", row.store_name)
            if target is None:
                continue
            ref = sql_examples.table_ref(schemas[checkpoint], int(row.operator_id), target.label)
            overdue, keys = read_query(
                samples_db,
                "SELECT sum(overdue_keys), sum(keys) FROM eviction_audit WHERE checkpoint = ? "
                "AND operator_id = ? AND store_name = ? AND state_var = ? AND version = ?",
                [checkpoint, row.operator_id, row.store_name, row.state_var, row.version],
            )[0]
            for watermark, expected in (
                (row.watermark_ms, overdue),
                (row.watermark_ms + year_ms, keys),
            ):
                query = sql_examples.overdue_keys(ref, target, int(watermark), limit=None)
                got = session.execute(f"SELECT count(*) FROM ({query})")
                assert got.table.column(0)[0].as_py() == expected, (checkpoint, query)
            ran += 1
    assert ran >= 10
