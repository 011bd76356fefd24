"""The SQL catalog over a fleet on S3: 500 checkpoints under one prefix (copies of one real
sample, in moto on 127.0.0.1). Listing the catalog lists the prefix in a few pages and reads
no file; a query on one checkpoint sends requests for that checkpoint only. Requests
are counted where the server sees them: moto's request log.

The time it takes is measured by ``benchmarks/bench_sql_fleet.py``, not here."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from stateglass.collectors.catalog import SqlSession
from tests.conftest import SAMPLES
from tests.remote.conftest import BUCKET, S3
from tests.remote.servers import ServedRequests, fill_fleet, last_batch_files, sent, served_requests

FLEET = 500
PREFIX = "fleet500"
STATE_FILES = (".delta", ".snapshot", ".zip", ".changelog", ".sst")


@pytest.fixture(scope="module")
def fleet(s3: S3) -> tuple[str, int]:
    """The fleet's URL, and how many objects it holds."""
    files = last_batch_files(SAMPLES / "spark-4.3" / "agg-hdfs")
    fill_fleet(BUCKET, files, [f"{PREFIX}/job-{i:04d}" for i in range(FLEET)])
    return f"s3://{BUCKET}/{PREFIX}", FLEET * len(files)


@pytest.fixture(scope="module")
def opened(fleet: tuple[str, int]) -> Iterator[tuple[SqlSession, ServedRequests]]:
    """A session over the fleet (one for the module: opening it is the slow part), and the
    requests moto has answered since just before it was opened."""
    with served_requests() as served, SqlSession([fleet[0]]) as session:
        yield session, served


@pytest.mark.slow  # 500 checkpoints put in moto
def test_a_fleet_lists_in_a_few_pages_and_reads_no_state(
    fleet: tuple[str, int], opened: tuple[SqlSession, ServedRequests]
) -> None:
    session, served = opened
    _, objects = fleet
    listed, read = sent(served, BUCKET)
    state = [e for e in session.tables() if e.kind == "state"]
    assert {e.schema for e in state} == {f"job_{i:04d}" for i in range(FLEET)}
    assert {e.table for e in state} == {"op0_default"}
    assert len(session.tables()) == FLEET * 6  # state, changes and 4 metadata tables
    # One listing of the whole prefix, in pages of at most 1,000 keys, instead of a
    # LIST per folder of every checkpoint (eight each).
    assert listed and all(p == f"{PREFIX}/" for p in listed)
    assert _recursive_listings(served) == [f"{PREFIX}/"]
    assert len(listed) <= -(-objects // 1000)
    # The tables are named from the folders; a checkpoint's files are read when a query
    # names it.
    assert not read


@pytest.mark.slow
def test_a_query_on_one_of_the_fleet_sends_requests_for_it_alone(
    opened: tuple[SqlSession, ServedRequests],
) -> None:
    session, served = opened
    before = len(served.requests)
    result = session.execute("SELECT count(*) AS n FROM job_0007.op0_default")
    assert result.table.column("n").to_pylist()[0] > 0
    listed, read = sent(served, BUCKET, before)
    own = f"{PREFIX}/job-0007/"
    assert [k for k in read if k.endswith(".snapshot")], read
    assert all(k.startswith(own) for k in read), read
    assert all(p.startswith(own) for p in listed), listed
    assert {d.schema for d in session.last_decoded} == {"job_0007"}
    before = len(served.requests)
    assert [n for n, _ in session.columns("job_0003", "op0_default")][:2] == ["key", "value"]
    listed, read = sent(served, BUCKET, before)
    assert read and all(k.startswith(f"{PREFIX}/job-0003/") for k in read), read
    assert not [k for k in read if k.endswith(STATE_FILES)]


def _recursive_listings(served: ServedRequests) -> list[str]:
    """The listings that asked for every key below a prefix (no delimiter)."""
    found = []
    for _, target in served.requests:
        query = parse_qs(urlsplit(target).query, keep_blank_values=True)
        if "list-type" in query and query.get("delimiter") in (None, [""]):
            found.append(query.get("prefix", [""])[0])
    return found


def test_a_checkpoint_named_directly_is_listed_folder_by_folder(s3: S3) -> None:
    # Its state files' keys would cost more pages than the few folders the catalog lists.
    with served_requests() as served, SqlSession([s3.url("spark-4.3/agg-hdfs")]) as session:
        assert {e.schema for e in session.tables() if e.kind == "state"} == {"agg_hdfs"}
    assert served.requests
    assert not _recursive_listings(served)
