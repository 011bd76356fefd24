"""Immutable state files are downloaded once: browsing a version twice, or diffing neighbouring
versions, reads them from the local cache; a rewritten object is never served stale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stateglass.collectors.remote import COUNTS
from stateglass.collectors.remote.cache import FileCache
from tests.remote.conftest import S3

SAMPLE = "spark-4.3/agg-rocks-cl"  # RocksDB: zips, SSTs and changelogs


def test_state_twice_and_a_diff_download_each_file_once(s3: S3, cli: Any, tmp_path: Path) -> None:
    url, cache = s3.url(SAMPLE), str(tmp_path / "cache")
    first = cli("state", url, "--batch-id", "9", "--cache-dir", cache)
    downloaded = COUNTS.fetched.copy()
    assert first.code == 0 and downloaded  # zips, SSTs, changelogs came over the network
    second = cli("state", url, "--batch-id", "9", "--cache-dir", cache, "--verbose")
    assert second.out == first.out
    assert COUNTS.fetched == set() and COUNTS.cache_hits == len(downloaded)
    assert "cache: " in second.err
    # Neighbouring versions share their files: one process, each file at most once.
    diff = cli("changes", url, "--from", "8", "--to", "10", "--cache-dir", cache)
    assert diff.code == 0 and COUNTS.refetched == 0


def test_without_the_cache_the_same_reads_download_again(s3: S3, cli: Any, tmp_path: Path) -> None:
    url = s3.url(SAMPLE)
    assert cli("state", url, "--batch-id", "9", "--cache-size", "0").code == 0
    assert cli("state", url, "--batch-id", "9", "--cache-size", "0").code == 0
    assert COUNTS.fetched  # the second run downloaded again: the check above can fail


def test_a_rewritten_object_is_not_served_stale(s3: S3, cli: Any, tmp_path: Path) -> None:
    src = Path(s3.local(SAMPLE))
    key = f"rewrite/{SAMPLE}"  # outside samples/: the fleet test counts what is there
    for path in sorted(src.rglob("*")):
        if path.is_file():
            rel = path.relative_to(src).as_posix()
            s3.client.put_object(Bucket="cps", Key=f"{key}/{rel}", Body=path.read_bytes())
    url, cache = f"s3://cps/{key}", str(tmp_path / "cache")
    newest = max(src.glob("state/0/0/*.zip"), key=lambda p: int(p.name.split(".")[0]))
    args = ("--batch-id", str(int(newest.name.split(".")[0]) - 1), "--partition", "0")
    assert cli("state", url, *args, "--cache-dir", cache).code == 0
    assert COUNTS.fetched  # the zip is in the cache now
    # A retried batch rewrites a file under the same name (checkpoint format v1).
    s3.client.put_object(Bucket="cps", Key=f"{key}/state/0/0/{newest.name}", Body=b"not a zip")
    r = cli("state", url, *args, "--cache-dir", cache)
    # The new bytes were read, not the cached good ones.
    assert r.code == 2 and f"{url}/state/0/0/{newest.name}: not a valid zip" in r.err


def test_cache_evicts_least_recently_used(tmp_path: Path) -> None:
    cache = FileCache(str(tmp_path), limit_bytes=3000)
    for i in range(3):
        cache.put(f"{i:064x}", bytes(1000))
    assert cache.get(f"{0:064x}") is not None  # 0 is now the most recently used
    cache.put(f"{3:064x}", bytes(1000))
    kept = [i for i in range(4) if cache.get(f"{i:064x}") is not None]
    assert 0 in kept and 3 in kept and len(kept) <= 3
