"""The Spark engine: one Spark task per chain, reading through the cluster's Hadoop file system.

The driver (this process) plans: it lists the checkpoint and decides which files each chain
needs (:func:`collectors.engines.hadoop.needed_files`). Each chain becomes one Spark partition
of ``binaryFiles`` over those files, named by their Hadoop URL (``s3://`` becomes ``s3a://``),
so executors read them with the cluster's own connectors and credentials. The bytes are
handed to :func:`stateglass.collectors.scan.chains.compute_chain` through an in-memory file system
on the
executor; only each chain's :class:`~collectors.scan.chains.ChainResult` travels back, and the
driver stays the one DuckDB writer.

StateGlass's code travels as a zip (``addPyFile``); :mod:`collectors.engines.executor` checks
on every executor that ``collectors`` and ``parsers`` come from that zip. See
docs/spark-engine.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import pickle
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from stateglass.collectors.docs import doc_path
from stateglass.collectors.engines import executor
from stateglass.collectors.engines.hadoop import (
    ChainFiles,
    hadoop_url,
    input_paths,
    needed_files,
    unsafe_chars,
)
from stateglass.collectors.engines.memfs import MemoryFileSystem
from stateglass.collectors.engines.ship import shipped_zip
from stateglass.collectors.errors import (
    CheckpointError,
    CollectorError,
    EngineError,
    QueryTimeLimit,
)
from stateglass.collectors.fs import FileInfo, FileSystem
from stateglass.collectors.scan.chains import ChainResult, ChainTask, compute_chain
from stateglass.collectors.stores import shared_dir

DEFAULT_MASTER = "local[*]"
# A master that does not answer a TCP connect within this long is reported, not waited for.
CONNECT_TIMEOUT = 10.0
# How long a job may wait for its first executor (no workers, or none with free cores/memory).
EXECUTOR_TIMEOUT_CONF = "spark.stateglass.executorTimeout"
EXECUTOR_TIMEOUT = 120.0
DOCS = f"see {doc_path('spark-engine.md')}"


def check_master(master: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Fail fast when a ``spark://`` master does not accept connections.

    Spark's own client retries for a minute and more before giving up; a typo in a port
    deserves one line at once. Other masters (yarn, k8s://, local) are left to Spark.
    """
    if not master.startswith("spark://"):
        return
    reasons = []
    # High availability: spark://host1:7077,host2:7077 — one live master is enough.
    for hostport in master[len("spark://") :].split(","):
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit():
            raise EngineError(master, "not a Spark master URL (expected spark://HOST:PORT)")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except OSError as exc:
            reasons.append(f"{hostport}: {exc.strerror or exc}")
    raise EngineError(
        master, f"cannot reach the Spark master within {timeout:.0f} s ({'; '.join(reasons)})"
    )


def spark_session(master: str | None = None) -> Any:
    """A SparkSession (the active one, or a local one), or :class:`EngineError` with how to
    get pyspark or Java: for callers outside the engine that run Spark's own readers."""
    return _session(master)


def check_spark(master: str | None) -> None:
    """Fail at once, in one line, when Spark cannot start: no pyspark, no Java, or a
    ``spark://`` master that does not answer (what a session would find out slowly)."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise EngineError(
            "--engine spark",
            "pyspark is not installed: pip install 'stateglass[spark]' (and a Java 17+ JDK)",
        )
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise EngineError("--engine spark", "no Java found: install a JDK 17+ or set JAVA_HOME")
    if master:
        check_master(master)


def _session(master: str | None) -> Any:
    check_spark(None)
    from pyspark.sql import SparkSession

    # Spark's console progress bar ("[Stage 0:> (0 + 1) / 4]") would be printed around, and
    # after, the one-line error a failed collect ends with: stderr is ours to keep readable.
    builder = SparkSession.builder.appName("stateglass-collect").config(
        "spark.ui.showConsoleProgress", "false"
    )
    # Under spark-submit the gateway exists already and --master was given there.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if master or (SparkSession.getActiveSession() is None and not submitted):
        master = master or DEFAULT_MASTER
        check_master(master)
        builder = builder.master(master)
        if master.startswith("local"):
            # Local workers must run this interpreter: it has our parsers' dependencies.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # py4j and Spark raise many kinds; all mean "no session"
        raise EngineError(master or "--engine spark", f"Spark did not start: {_line(exc)}") from exc
    if session.sparkContext.getConf().get("spark.log.level") is None:
        # A failed task is logged at WARN with its whole traceback; we print one line instead.
        session.sparkContext.setLogLevel("ERROR")
    return session


def _quiet(sc: Any) -> None:
    """Silence Spark's log after a failed job: what it logs while it stops (lost executors,
    interrupted threads, with their Java stack traces) would follow our one-line error."""
    with contextlib.suppress(Exception):
        sc.setLogLevel("OFF")


def _line(exc: BaseException) -> str:
    """One line out of a Spark/py4j error: ours if an executor sent one, else the first."""
    text = str(exc)
    ours = re.search(re.escape(executor.MARK) + r"(.*?)" + re.escape(executor.END), text)
    if ours:
        return ours.group(1)
    missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", text)
    if missing:
        return (
            f"executors have no module {missing.group(1)!r}: ship StateGlass's dependencies "
            f"with spark.archives, {DOCS}"
        )
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


@functools.lru_cache(maxsize=1)
def _register_executor_by_value() -> None:
    # By value: unpickling the task function on an executor must not import ``collectors``.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(executor)


def _ship(sc: Any) -> str:
    """Add the code zip to ``sc`` once; its file name on the executors."""
    path = shipped_zip()
    if getattr(sc, "_stateglass_zip", None) != path:
        sc.addPyFile(path)
        sc._stateglass_zip = path
    return os.path.basename(path)


def sst_listing(provider: str, store_dir: str, fs: FileSystem) -> tuple[FileInfo, ...] | None:
    """The SST files a store directory's versions share (RocksDB), or None: no such folder."""
    shared = shared_dir(provider)
    if shared is None:
        return None
    sst_dir = f"{store_dir.rstrip('/')}/{shared}"
    if not fs.is_dir(sst_dir):
        return None
    return tuple(
        f
        for f in fs.list(sst_dir)
        if not f.is_dir and not f.name.startswith(".") and f.name.endswith(".sst")
    )


def plan(task: ChainTask, fs: FileSystem) -> tuple[ChainTask, ChainFiles]:
    """The task as the executor runs it (its trimmed listing) and the files it reads."""
    files = task.files
    if files is None:
        files = tuple(f for f in fs.list(task.store_dir) if not f.is_dir)
    files = tuple(f for f in files if not f.is_dir and not f.name.startswith("."))
    chain = needed_files(files, task.from_version, sst_listing(task.provider, task.store_dir, fs))
    return dataclasses.replace(task, files=chain.store_files), chain


def chain_inputs(store_dir: str, chain: ChainFiles) -> str | None:
    """The comma-separated Hadoop input paths of one chain; None when it has no file."""
    store = hadoop_url(store_dir.rstrip("/"))
    dirs = {store: [f.name for f in chain.store_files]} if chain.store_files else {}
    if chain.sst_files:
        dirs[f"{store}/SSTs"] = [f.name for f in chain.sst_files]
    if not dirs:
        return None
    bad = unsafe_chars(store + "".join(n for names in dirs.values() for n in names))
    if bad:
        raise EngineError(
            store_dir,
            f"the Spark engine cannot read a path with {bad!r}: Hadoop takes them for globs",
        )
    return input_paths(dirs)


class _Watchdog:
    """Cancels the jobs when no executor has joined after ``timeout`` seconds."""

    def __init__(self, sc: Any, timeout: float) -> None:
        self.sc = sc
        self.timeout = timeout
        self.fired = False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="stateglass-spark-watchdog")

    def _executors(self) -> int:
        # The driver counts itself as a block manager: more than one means an executor.
        return int(self.sc._jsc.sc().getExecutorMemoryStatus().size()) - 1

    def _watch(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self.done.wait(1.0):
            if self._executors() > 0:
                return
            if time.monotonic() > deadline:
                self.fired = True
                self.sc.cancelAllJobs()
                return

    def __enter__(self) -> _Watchdog:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


class SparkEngine:
    name = "spark"
    # Tasks travel to executors: key sets would be shipped with every one.
    carries_keys = False

    def __init__(self, master: str | None = None) -> None:
        self.master = master

    def run(self, tasks: Sequence[ChainTask], fs: FileSystem) -> Iterator[ChainResult]:
        if not tasks:
            return iter(())
        remote: list[tuple[int, tuple[ChainTask, ChainFiles], str]] = []
        local: list[tuple[int, ChainResult]] = []
        for i, task in enumerate(tasks):
            try:
                planned = plan(task, fs)
            except CheckpointError:
                # Its directory cannot be listed: the driver records the problem, as the local
                # engine would, instead of failing every other chain.
                local.append((i, compute_chain(task, fs)))
                continue
            paths = chain_inputs(planned[0].store_dir, planned[1])
            if paths is None:
                # No file to read needs no executor (and binaryFiles refuses an empty input).
                t, c = planned
                empty = MemoryFileSystem(t.store_dir, c.store_files, c.sst_files, {})
                local.append((i, compute_chain(t, empty)))
            else:
                remote.append((i, planned, paths))
        if not remote:
            return iter(dataclasses.replace(r, task=tasks[i]) for i, r in local)
        payload = pickle.dumps([p for _, p, _ in remote])
        inputs = [paths for _, _, paths in remote]
        collected = run_on_executors(self.master, inputs, executor.run_chain, payload)
        done = [(i, r) for (i, _, _), r in zip(remote, collected, strict=True)] + local
        # Results name the task as the scan planned it, not the trimmed copy sent out.
        return iter(dataclasses.replace(r, task=tasks[i]) for i, r in done)


def run_on_executors(
    master: str | None,
    inputs: Sequence[str],
    task: Callable[..., Iterator[Any]],
    payload: bytes,
    deadline: float | None = None,
) -> list[Any]:
    """Run ``task(zip_name, payload, index, files)`` once per entry of ``inputs`` (the Hadoop
    input paths of Spark partition ``index``), each on one executor; what each yields, in
    order. ``task`` is a function of :mod:`.executor`. Past ``deadline`` (monotonic) the jobs
    are cancelled and :class:`QueryTimeLimit` says so; any other failure is one line."""
    spark = _session(master)
    sc = spark.sparkContext
    master = sc.master
    _register_executor_by_value()
    zip_name = _ship(sc)
    timeout = float(sc.getConf().get(EXECUTOR_TIMEOUT_CONF, str(EXECUTOR_TIMEOUT)))
    # Local masters run tasks in the driver's JVM: there is no executor to wait for.
    watchdog = None if master.startswith("local") else _Watchdog(sc, timeout)
    alarm = None
    if deadline is not None:
        alarm = threading.Timer(max(0.0, deadline - time.monotonic()), sc.cancelAllJobs)
        alarm.daemon = True
    try:
        # coalesce(1) without a shuffle: one task reads all of its partition's files.
        rdds = [sc.binaryFiles(paths, 1).coalesce(1) for paths in inputs]
        union = sc.union(rdds)
        if union.getNumPartitions() != len(inputs):
            raise EngineError(master, "Spark did not give one partition per task")
        job = union.mapPartitionsWithIndex(functools.partial(task, zip_name, payload))
        if alarm is not None:
            alarm.start()
        with watchdog or contextlib.nullcontext():
            return list(job.collect())
    except CollectorError:
        raise  # ours already: one line of the right kind
    except Exception as exc:  # Py4JJavaError, PySparkException...: one line for the user
        _quiet(sc)
        if deadline is not None and time.monotonic() >= deadline:
            why = f"stopped at the time limit while Spark decoded ({master})"
            raise QueryTimeLimit(why) from exc
        if watchdog is not None and watchdog.fired:
            raise EngineError(
                master,
                f"no executor joined within {timeout:.0f} s: are workers running, with "
                f"enough free cores and memory? ({EXECUTOR_TIMEOUT_CONF} sets the wait)",
            ) from exc
        raise EngineError(master, _line(exc)) from exc
    finally:
        if alarm is not None:
            alarm.cancel()
