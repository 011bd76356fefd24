"""Shared fixtures and helpers, defined once for the whole suite: the sample checkpoints' paths
and private copies of them, the corpus of real Spark checkpoints (unpacked once per test
session), every sample checkpoint collected once into one database, and one SparkSession for
the whole test session (Spark's own reader is the oracle; the Spark engine runs on it too)
with ``spark_conf`` to change its settings for one query. A test session is one xdist
worker's under ``make test``: each builds these once, for the tests it is given.

Test modules import the plain helpers from here (``from tests.conftest import SAMPLES``):
``tests`` is a package, so no test folder can shadow an installed library of the same name.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.jvm import JVM_OPTIONS, jvm_options, session_builder, start_archive, wait_for_archive

# Real queries' progress events, run only when a test asks for them; moto's DynamoDB
# and the DynamoDB sample in it.
pytest_plugins = ["tests.progress_fixtures", "tests.dynamodb_fixtures"]

ROOT = Path(__file__).resolve().parents[1]
# The JVMs that tests start through spark-submit in other processes (the progress query, the
# probes of the Spark engine, Spark 3.5's driver) take the same options: spark-submit adds
# $SPARK_SUBMIT_OPTS to the driver's command line (the progress query: 26 s of CPU to 15 s).
# The class-data archive joins them once it is made (pytest_runtest_setup).
os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_OPTIONS)
_SUBMIT_OPTS_OURS = os.environ["SPARK_SUBMIT_OPTS"] == JVM_OPTIONS
SAMPLES = ROOT / "sample_checkpoints"
# The corpus of real checkpoints lives in ``shared/`` beside the clone (CI: ``../shared``; a
# worktree under ``wt/`` finds it one level further up).
CORPUS_NAME = Path("shared") / "fixtures" / "spark-checkpoints.tar.gz"
CORPUS_TARBALL = next(
    (d / CORPUS_NAME for d in ROOT.parents if (d / CORPUS_NAME).exists()),
    ROOT.parent / CORPUS_NAME,
)
CORPUS_MISSING = (
    f"checkpoint corpus not found: {CORPUS_NAME} beside the clone or above it "
    "(CI's fresh clone has ../shared)"
)


def sample_checkpoints() -> list[str]:
    """Every sample checkpoint's path (``sample_checkpoints/**``), sorted."""
    from stateglass.app.discovery import find_checkpoints

    return find_checkpoints(str(SAMPLES))


def sample_id(path: str) -> str:
    """A sample's path under ``sample_checkpoints/``: readable test ids."""
    return os.path.relpath(path, SAMPLES)


def copy_checkpoint(src: Path | str, dst: Path) -> Path:
    """A private copy of a checkpoint (mtimes kept) for a test that changes or damages files."""
    shutil.copytree(src, dst, symlinks=True)
    return dst


def with_spark_file_times(cp: Path) -> Path:
    """``cp`` with the file times Spark gave its logs (a git clone has the clone's): offsets/N
    at its batchTimestampMs, commits/N and state version N+1 a second later."""
    for f in sorted((cp / "offsets").iterdir()):
        if not f.name.isdigit():
            continue
        at = json.loads(f.read_text().split("\n")[1])["batchTimestampMs"] / 1000
        os.utime(f, (at, at))
        done = [cp / "commits" / f.name, *cp.glob(f"state/*/*/{int(f.name) + 1}.*")]
        for path in done:
            if path.exists():
                os.utime(path, (at + 1, at + 1))
    return cp


def copy_until(src: Path | str, dst: Path, batches: int) -> Path:
    """A private copy of a checkpoint as it was before batch ``batches`` began: offsets and
    commits of batches 0..batches-1, state versions up to ``batches``, only the SSTs those
    versions' zips name, no partition directory the later batches made. Copying the copy of a
    later batch over it (``shutil.copytree(..., dirs_exist_ok=True)``) adds what those
    batches wrote, as a running query would."""
    copy_checkpoint(src, dst)
    for log in ("offsets", "commits"):
        for f in (dst / log).iterdir():
            name = f.name.removeprefix(".").removesuffix(".crc")
            if name.isdigit() and int(name) >= batches:
                f.unlink()
    for part in (dst / "state").glob("*/*"):
        if not part.name.isdigit():
            continue
        named: set[str] = set()
        for f in list(part.iterdir()):
            version, _, kind = f.name.removeprefix(".").removesuffix(".crc").partition(".")
            if version.isdigit() and int(version) > batches:
                f.unlink()
            elif kind == "zip" and not f.name.startswith("."):
                meta = zipfile.ZipFile(f).read("metadata").decode().split("\n", 1)[1]
                named |= {s["dfsSstFileName"] for s in json.loads(meta)["sstFiles"]}
        for f in part.glob("SSTs/*"):
            if f.name.removeprefix(".").removesuffix(".crc") not in named:
                f.unlink()
        if not any(f.name[0].isdigit() for f in part.iterdir()):
            shutil.rmtree(part)  # a partition a later repartition made
    return dst


# File sources read ``maxFilesPerTrigger`` files at a time in modification-time order; files
# written in the same millisecond tie, and Spark may then read batch 3 before batch 0.
BATCH_FILES_MTIME = 1_700_000_000


def write_batch_files(src: Path, batches: list[list[dict[str, Any]]]) -> Path:
    """One JSON-lines file per batch, each a second newer than the last: the order Spark reads
    them in (with ``maxFilesPerTrigger=1``, file N is batch N)."""
    src.mkdir(parents=True, exist_ok=True)
    for n, rows in enumerate(batches):
        path = src / f"{n:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (BATCH_FILES_MTIME + n, BATCH_FILES_MTIME + n))
    return src


@contextmanager
def spark_conf(spark: Any, conf: dict[str, str]) -> Iterator[None]:
    """Set session confs for one query start, then restore them (the session is shared)."""
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist, pytest's main process collects nothing and runs no test: it makes the
    JVMs' class-data archive (tests/jvm.py) while the workers start."""
    if not os.environ.get("PYTEST_XDIST_WORKER") and session.config.getoption("dist", "no") != "no":
        start_archive()


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") or session.config.option.collectonly:
        return
    if any("spark" in item.fixturenames for item in session.items):
        start_archive()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if _SUBMIT_OPTS_OURS:
        os.environ["SPARK_SUBMIT_OPTS"] = jvm_options()


def pytest_unconfigure(config: pytest.Config) -> None:
    wait_for_archive()


def _cost(item: pytest.Item) -> int:
    """A guess at a test's cost: most of the time goes to Spark, and the slowest are marked."""
    return 2 if item.get_closest_marker("slow") else int("spark" in item.fixturenames)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On an xdist worker (``make pytest``: ``--dist loadfile --no-loadscope-reorder``), the
    files in the order the workers are to take them: the costly first, so that the last file
    a worker takes is short and neither waits long for the other at the end."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    ordered = sorted(files.values(), key=lambda f: (-max(map(_cost, f)), -len(f)))
    items[:] = [item for f in ordered for item in f]


# Files whose tests share a session fixture that costs Spark minutes: one xdist worker takes
# them together (one work unit), so that it alone builds the fixture. xdist's own
# ``loadgroup`` cannot do this under pytest 9, which no longer lets it rename the tests.
WORKER_GROUPS = {
    file: group
    for group, files in {
        "eviction queries": ("eviction/test_join_evidence.py", "eviction/test_queries.py"),
        "progress runs": (
            "app/test_figures_progress.py",
            "app/test_metrics_cmd.py",
            "app/test_pages_progress.py",
            "health/test_progress_rules.py",
        ),
        "dynamodb runs": (
            "dynamodb/test_conformance.py",
            "dynamodb/test_fidelity.py",
            "app/test_pages_dynamodb.py",
        ),
    }.items()
    for file in (f"tests/{name}" for name in files)
}


# Optional, so the suite still runs with ``-p no:xdist`` in one process.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, a file's tests on one worker, with the files of a
    :data:`WORKER_GROUPS` group on one worker too."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileOrGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return WORKER_GROUPS.get(file, file)

    return FileOrGroupScheduling(config, log)


@pytest.fixture(scope="session")
def fixture_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``out`` directory of the corpus: ``out/<version>/<scenario>/checkpoint``."""
    if not CORPUS_TARBALL.exists():
        pytest.fail(CORPUS_MISSING, pytrace=False)
    target = tmp_path_factory.mktemp("corpus")
    with tarfile.open(CORPUS_TARBALL) as tar:
        tar.extractall(target, filter="data")
    return target / "out"


@dataclass(frozen=True)
class SamplesDb:
    """A database with every sample checkpoint collected (``stateglass collect``'s defaults),
    and each sample's recorded root by its path under ``sample_checkpoints/``."""

    path: str
    roots: dict[str, str]


@pytest.fixture(scope="session")
def all_samples_db(tmp_path_factory: pytest.TempPathFactory) -> SamplesDb:
    """Collected once per test session: the app, collector, report and eviction tests only
    read it (a test that writes makes its own)."""
    from stateglass.collectors.db.writer import Database
    from stateglass.collectors.scan.scanner import scan_checkpoint

    db = Database(str(tmp_path_factory.mktemp("samples-db") / "samples.duckdb"))
    roots = {sample_id(path): scan_checkpoint(db, path).checkpoint for path in sample_checkpoints()}
    return SamplesDb(db.path, roots)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java: install openjdk-17 to run the Spark oracle tests")
    # The Spark engine's Python tasks must run in this interpreter: it has our dependencies.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        session_builder("stateglass-oracle", jvm_options())
        .config("spark.driver.memory", "2g")
        # Spark starts one maintenance task per session, at the interval the first stateful
        # query asks for; tests that need snapshots and purges while they watch would
        # otherwise wait out the default 60 s, and see none.
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "500ms")
        .config("spark.log.level", "ERROR")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
