"""`stateglass state` against Spark's reader for the last batch of every corpus checkpoint.

The corpus (``tests/conftest.py``'s ``fixture_corpus``) holds 71 checkpoints written by Spark
3.5, 4.0, 4.1 and 4.3. For each one, every operator and store is read at the last committed
batch — a transformWithState store once per state variable and once for its timers — by Spark
4.3's State Data Source and by StateGlass, and the rows must be the same.

Some reads Spark 4.3 itself cannot do; those cases end as xfail naming why (``SPARK_CANNOT``),
and fail if Spark fails for another reason. Checkpoint format v2 needs the reading session's
``checkpointFormatVersion`` set to 2 (``checkpoint_format``).

Spark reads a transformWithState operator's schema files from the absolute paths its operator
metadata records (``file:/tmp/spk/out/…`` where the corpus was written), so the fixture
``recorded_root`` makes that path lead to the unpacked corpus for the session.
"""

from __future__ import annotations

import os
import re
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.cli import main as cli_main
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from tests.conftest import CORPUS_MISSING, CORPUS_TARBALL
from tests.e2e.oracle import multiset, spark_state, state_reads

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Reads Spark 4.3's reader fails on: (what its error says, why). Spark must still fail there.
SPARK_CANNOT = {
    # No operator metadata before Spark 4.0, so Spark (and StateGlass) take the session
    # window's prefix-scan keys for plain keys and cannot decode them.
    "3.5.9/session-rocks-cl": (
        "STATE_STORE_KEY_ROW_FORMAT_VALIDATION_FAILURE",
        "3.5 session windows on RocksDB: no operator metadata says the keys are prefix-scan",
    ),
}
# Directories of the corpus that hold no checkpoint at all.
EMPTY = {"3.5.9b/fmgws-hdfs"}


def _corpus_names() -> list[str]:
    """``<version>/<scenario>`` of every checkpoint in the tarball (read at collection)."""
    if not CORPUS_TARBALL.exists():
        raise FileNotFoundError(CORPUS_MISSING)
    names: set[str] = set()
    with tarfile.open(CORPUS_TARBALL) as tar:
        for member in tar:
            parts = member.name.split("/")
            if len(parts) >= 4 and parts[0] == "out" and parts[3] == "checkpoint":
                names.add(f"{parts[1]}/{parts[2]}")
    return sorted(names)


def _recorded_roots(corpus: Path) -> set[str]:
    """Where the corpus was written, as operator metadata v2 records schema file paths."""
    roots: set[str] = set()
    for meta in corpus.glob("*/*/checkpoint/state/*/_metadata/v2/*"):
        text = meta.read_text(encoding="utf-8", errors="replace")
        roots.update(re.findall(r"file:(/[^\"]*?/out)/[^/\"]+/[^/\"]+/checkpoint/", text))
    return roots


@pytest.fixture(scope="session")
def recorded_root(fixture_corpus: Path) -> Iterator[None]:
    """Make the recorded ``…/out`` path lead to the unpacked corpus while the session lasts."""
    made: list[Path] = []  # links and directories we created, removed in reverse order
    for root in sorted(_recorded_roots(fixture_corpus)):
        link = Path(root)
        if link.exists() or link.is_symlink():
            continue  # already there (e.g. another copy of the corpus): compared per case
        missing = [p for p in reversed(link.parents) if not p.exists()]
        try:
            for directory in missing:
                directory.mkdir()
                made.append(directory)
            link.symlink_to(fixture_corpus, target_is_directory=True)
            made.append(link)
        except OSError:
            continue
    yield
    for path in reversed(made):
        if path.is_symlink():
            path.unlink()
        else:
            path.rmdir()


def _schema_files_reachable(cp: Checkpoint) -> str | None:
    """Why Spark could not find this checkpoint's recorded schema files (None: it can)."""
    for meta in Path(cp.root).glob("state/*/_metadata/v2/*"):
        text = meta.read_text(encoding="utf-8", errors="replace")
        for recorded in re.findall(r"file:(/[^\"]+/_stateSchema/[^\"]+)", text):
            here = Path(cp.root) / recorded[recorded.index("/state/") + 1 :]
            there = Path(recorded)
            if not there.exists() or there.read_bytes() != here.read_bytes():
                return f"schema file {recorded} is not this corpus's"
    return None


def _spark_error(exc: BaseException) -> str:
    text = str(exc)
    found = re.search(r"\[[A-Z_.]+\][^\n]*|\w+(?:Exception|Error): [^\n]*", text)
    return (found.group(0) if found else text.splitlines()[0] if text else repr(exc))[:300]


@pytest.mark.parametrize("name", _corpus_names())
def test_corpus_checkpoint_matches_spark(
    spark: Any, fixture_corpus: Path, recorded_root: None, tmp_path: Path, name: str
) -> None:
    path = str(fixture_corpus / name / "checkpoint")
    if name in EMPTY:
        assert not os.listdir(path)
        pytest.skip("empty checkpoint directory in the corpus")
    cp = Checkpoint.open(path)
    batch = cp.last_committed_batch
    if batch is None:
        # The query died before committing a batch: there is no state to read, for either.
        assert cli_main(["state", path, "-o", str(tmp_path / "none.jsonl")]) == 2
        pytest.skip("no committed batch in this checkpoint")
    unreachable = _schema_files_reachable(cp)
    mismatches: list[str] = []
    spark_failures: list[str] = []
    checked = 0
    ours_fail: list[str] = []
    checked = 0
    with checkpoint_format(spark, cp):
        for what, store_name, options, args in _reads(cp):
            out = tmp_path / f"{checked}-{len(spark_failures)}.jsonl"
            cli = [
                "state",
                path,
                "--operator",
                what.split("/")[0][2:],
                "--store",
                store_name,
                "--batch-id",
                str(batch),
                *args,
                "-o",
                str(out),
            ]
            code = cli_main(cli)
            if unreachable and (options.get("stateVarName") or options.get("readRegisteredTimers")):
                pytest.skip(unreachable)
            try:
                expected = spark_state(
                    spark, path, int(what.split("/")[0][2:]), store_name, batch, options
                )
            except Exception as exc:  # Py4JJavaError, AnalysisException, …
                spark_failures.append(f"{what}: {_spark_error(exc)}")
                if code != 0:
                    ours_fail.append(what)
                continue
            checked += 1
            if code != 0:
                mismatches.append(f"{what}: stateglass exited {code}, Spark read it")
                continue
            got = out.read_text(encoding="utf-8").splitlines()
            if multiset(got) != multiset(expected):
                mismatches.append(f"{what}: {len(got)} rows, Spark {len(expected)}")
    assert not mismatches, "differs from Spark: " + "; ".join(mismatches)
    if spark_failures:
        known = SPARK_CANNOT.get(name)
        assert known is not None, "Spark failed: " + "; ".join(spark_failures)
        assert all(known[0] in f for f in spark_failures), spark_failures
        ours_too = " (neither can StateGlass)" if ours_fail else "; StateGlass can"
        pytest.xfail(f"Spark 4.3 cannot read it{ours_too}: {known[1]}")
    assert checked


def _reads(cp: Checkpoint) -> list[tuple[str, str, dict[str, Any], list[str]]]:
    """``(what, store name, Spark options, stateglass arguments)`` for every read of ``cp``.

    A store keeping other stores as column families (join state format 3 and 4) is read per
    column family, by name, as Spark's ``storeName`` takes them.
    """
    reads = []
    for store in cp.stores():
        op = f"op{store.operator_id}"
        if store.uses_column_families and not store.is_transform_with_state:
            for cf in store.column_families:
                reads.append((f"{op}/{cf.name}", cf.name, {}, []))
            continue
        for label, options, args in state_reads(store):
            if label.endswith("-noflat"):
                continue  # unflattened reads are checked on the samples (test_fidelity)
            what = f"{op}/{store.store_name}{'/' + label if label else ''}"
            reads.append((what, store.store_name, options, args))
    return reads


@contextmanager
def checkpoint_format(spark: Any, cp: Checkpoint) -> Iterator[None]:
    """Read checkpoint format v2 (unique ids in commits/) with the session set for it.

    Spark's reader takes ``stateStore.checkpointFormatVersion`` from the session, not the
    offset log; left at 1 it cannot open a v2 RocksDB store (NumberFormatException on
    ``<version>_<uuid>`` file names).
    """
    last = cp.last_committed_batch
    v2 = last is not None and bool(cp.commit(last).state_unique_ids)
    key = "spark.sql.streaming.stateStore.checkpointFormatVersion"
    if not v2:
        yield
        return
    before = spark.conf.get(key, None)
    spark.conf.set(key, "2")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
