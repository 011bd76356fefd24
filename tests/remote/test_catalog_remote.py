"""The SQL catalog over an S3 prefix (moto on 127.0.0.1): the same tables and rows as over the
local copies, and a query on one checkpoint downloads state files of that one only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stateglass.collectors.catalog import SqlLimits, SqlSession
from stateglass.collectors.catalog.names import quoted
from stateglass.collectors.remote import COUNTS
from tests.collectors.test_catalog_fidelity import rows
from tests.conftest import SAMPLES, copy_until
from tests.remote.conftest import BUCKET, S3, upload
from tests.remote.servers import Gate, Proxy, sent, served_requests


def test_an_s3_prefix_is_the_same_catalog_as_its_local_copy(s3: S3) -> None:
    prefix = f"s3://{BUCKET}/samples/spark-4.3"
    with SqlSession([prefix]) as remote, SqlSession([s3.local("spark-4.3")]) as local:
        listed = [(e.schema, e.table, e.kind) for e in remote.tables()]
        assert listed == [(e.schema, e.table, e.kind) for e in local.tables()]
        assert {e.schema for e in remote.tables()} >= {"agg_hdfs", "tws_rocks_cl"}
        for schema, table, kind in listed:
            if kind not in ("state", "timers", "metadata"):
                continue
            sql = f"SELECT * FROM {quoted(schema)}.{quoted(table)}"
            assert rows(remote.execute(sql).table) == rows(local.execute(sql).table), table


def test_a_query_on_one_checkpoint_reads_only_its_files(s3: S3) -> None:
    # A prefix of its own: nothing of it is in the download cache yet.
    prefix = f"s3://{BUCKET}/catalog-only"
    for name in ("agg-hdfs", "dedup-hdfs", "join-hdfs"):
        upload(s3.client, BUCKET, SAMPLES / "spark-4.3" / name, f"catalog-only/{name}")
    COUNTS.reset()
    with SqlSession([prefix]) as session:
        # Their tables are named from the listing: no checkpoint's file is read to list them.
        assert COUNTS.get == 0
        assert len(session.tables()) > 3 * 6
        result = session.execute("SELECT count(*) AS n FROM agg_hdfs.op0_default")
        assert result.table.column("n").to_pylist()[0] > 0
        assert COUNTS.fetched
        assert all(url.startswith(f"{prefix}/agg-hdfs/") for url in COUNTS.fetched)
        assert {d.schema for d in session.last_decoded} == {"agg_hdfs"}
        # DuckDB's own catalog lists every checkpoint's tables, registered before it runs.
        sql = (
            "SELECT table_schema AS s, count(*) AS n FROM information_schema.tables "
            "WHERE table_schema LIKE '%hdfs' GROUP BY 1 ORDER BY 1"
        )
        found = session.execute(sql).table.to_pylist()
        assert found == [
            {"s": e, "n": sum(t.schema == e for t in session.tables())}
            for e in ("agg_hdfs", "dedup_hdfs", "join_hdfs")
        ]


def test_a_new_commit_on_s3_is_seen_by_the_next_query(s3: S3, tmp_path: Path) -> None:
    sample = SAMPLES / "spark-4.3" / "agg-hdfs"
    early = copy_until(sample, tmp_path / "agg-hdfs", 5)
    prefix = "catalog-live/agg-hdfs"
    upload(s3.client, BUCKET, early, prefix)
    sql = "SELECT DISTINCT batch_id FROM agg_hdfs.op0_default"
    with SqlSession([f"s3://{BUCKET}/{prefix}"]) as session:
        assert session.execute(sql).table.column("batch_id").to_pylist() == [4]
        upload(s3.client, BUCKET, sample, prefix)
        assert session.execute(sql).table.column("batch_id").to_pylist() == [11]


def test_a_one_shot_query_lists_each_partition_once(s3: S3) -> None:
    """A session that keeps no decoded partitions (the CLI's ``-e``) needs no listing to key
    them by: the reader's own listing of each partition's folder is the only one."""
    prefix = "catalog-one-shot/agg-hdfs"
    upload(s3.client, BUCKET, SAMPLES / "spark-4.3" / "agg-hdfs", prefix)
    one_shot = SqlSession([f"s3://{BUCKET}/{prefix}"], limits=SqlLimits(cache_bytes=0))
    # Opened before the recording starts: only the query's requests are counted.
    with one_shot as session, served_requests() as served:
        session.execute("SELECT count(*) FROM agg_hdfs.op0_default")
    listed, _ = sent(served, BUCKET)
    partitions = [p for p in listed if p.startswith(f"{prefix}/state/0/") and "_" not in p]
    # Partition 0's folder was listed when the session opened, to name the store.
    assert sorted(partitions) == [f"{prefix}/state/0/{p}/" for p in (1, 2, 3)], listed


@pytest.mark.parametrize(
    ("sample", "commits_read"),
    [
        pytest.param("spark-4.3/agg-rocks", False, id="format-v1"),
        pytest.param("4.0.5b/agg-rocks-cl-ckv2", True, id="format-v2"),
    ],
)
def test_partitions_decoded_at_once_read_each_file_once(
    s3: S3, fixture_corpus: Path, sample: str, commits_read: bool
) -> None:
    """Many decoding threads ask for the checkpoint's logs at once: each file is one request.
    Only format v2 needs the commits' unique ids: a v1 store reads the commit of the batch it
    reads (so a damaged one is said), not all Spark keeps (a hundred by default)."""
    local = SAMPLES / sample if sample.startswith("spark-") else fixture_corpus / sample
    local = local / "checkpoint" if (local / "checkpoint").is_dir() else local
    prefix = f"catalog-threads/{sample.replace('/', '-')}"
    upload(s3.client, BUCKET, local, prefix)
    threads = SqlSession([f"s3://{BUCKET}/{prefix}"], limits=SqlLimits(decoders=8, cache_bytes=0))
    with threads as session, served_requests() as served:
        (entry,) = [e for e in session.tables() if e.kind == "state"]
        session.execute(f"SELECT count(*) FROM {quoted(entry.schema)}.{quoted(entry.table)}")
    _, read = sent(served, BUCKET)
    names = [p.name for p in (local / "commits").iterdir() if p.name.isdigit()]
    last = f"{prefix}/commits/{max(names, key=int)}"
    # The last commit is the query's to check; v2's unique ids are read with the store's
    # source, opened with the catalog and kept while no batch commits: twice at most.
    twice = [k for k in set(read) if read.count(k) > 1]
    assert read and twice in ([], [last] if commits_read else []), twice
    assert max(read.count(k) for k in read) <= 2
    commits = {k for k in read if k.startswith(f"{prefix}/commits/")}
    assert commits == ({f"{prefix}/commits/{n}" for n in names} if commits_read else {last})


def test_a_checkpoint_on_an_object_store_decodes_more_partitions_at_once(s3: S3) -> None:
    """A partition on an object store mostly waits on its requests, so a session decodes more
    of them at once there than it would on local disk."""
    sample = SAMPLES / "spark-4.3" / "agg-hdfs"
    sql = "SELECT count(*) AS n FROM agg_hdfs.op0_default"
    with SqlSession([str(sample)]) as local:
        counted = local.execute(sql).table.column("n").to_pylist()
        partitions = len(local.last_decoded)
    prefix = "catalog-overlap/agg-hdfs"
    upload(s3.client, BUCKET, sample, prefix)
    # Each partition's first state file is held until every partition has asked for one.
    gate = Gate(rf"/{prefix}/state/0/\d+/\d+\.(delta|snapshot)", partitions)
    limits = SqlLimits(decoders=1, cache_bytes=0)  # one at a time would never open the gate
    assert 1 < partitions <= limits.remote_decoders
    with Proxy(s3.endpoint, gate=gate) as proxy:
        os.environ["AWS_ENDPOINT_URL"] = proxy.url
        try:
            with SqlSession([f"s3://{BUCKET}/{prefix}"], limits=limits) as session:
                assert session.execute(sql).table.column("n").to_pylist() == counted
        finally:
            os.environ["AWS_ENDPOINT_URL"] = s3.endpoint
    assert gate.opened
