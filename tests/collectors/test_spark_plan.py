"""The Spark engine's pure parts and its shipped zip, without a JVM.

The zip is imported in a fresh interpreter that holds the decoy ``collectors`` (another job's
module, imported by the decoy's ``sitecustomize``) and has no StateGlass installed, as a
cluster's Python worker would: everything of ours resolves under ``stateglass.`` to the zip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from stateglass.collectors.engines.hadoop import hadoop_url, input_paths, needed_files, unsafe_chars
from stateglass.collectors.engines.memfs import MemoryFileSystem
from stateglass.collectors.engines.ship import build_zip, shipped_zip
from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.fs import LOCAL, FileInfo
from tests.collectors.cluster import VENV_SITE
from tests.collectors.helpers import ROOT, SAMPLES

DECOY = Path(__file__).parent / "decoy"


@pytest.mark.parametrize(
    ("given", "hadoop"),
    [
        pytest.param("/data/cp", "file:///data/cp", id="plain"),
        pytest.param("file:///data/cp", "file:///data/cp", id="file"),
        pytest.param("s3://b/cp", "s3a://b/cp", id="s3"),
        pytest.param("S3://b/cp", "s3a://b/cp", id="s3-upper"),
        pytest.param("s3n://b/cp", "s3a://b/cp", id="s3n"),
        pytest.param("s3a://b/cp", "s3a://b/cp", id="s3a"),
        pytest.param("gs://b/cp", "gs://b/cp", id="gs"),
        pytest.param(
            "abfss://c@a.dfs.core.windows.net/cp", "abfss://c@a.dfs.core.windows.net/cp", id="abfss"
        ),
        pytest.param("hdfs://nn:8020/cp", "hdfs://nn:8020/cp", id="hdfs"),
        pytest.param("dbfs:/cp", "dbfs:/cp", id="dbfs"),
    ],
)
def test_hadoop_url(given: str, hadoop: str) -> None:
    assert hadoop_url(given) == hadoop


def test_relative_paths_become_absolute_file_urls() -> None:
    assert hadoop_url("cp") == "file://" + os.path.abspath("cp")


def test_input_paths_list_each_directory_once() -> None:
    paths = input_paths({"s3a://b/cp/state/0/0": ["2.delta", "1.delta"], "s3a://b/x/SSTs": ["a"]})
    assert paths == "s3a://b/cp/state/0/0/{1.delta,2.delta},s3a://b/x/SSTs/{a}"
    assert unsafe_chars("file:///tmp/a,b/{c}") == ",{}"
    assert unsafe_chars("s3a://bucket/cp/state/0/0") == ""


def _infos(store_dir: Path) -> tuple[FileInfo, ...]:
    return tuple(f for f in LOCAL.list(str(store_dir)) if not f.is_dir)


def test_needed_files_start_at_the_newest_snapshot_below() -> None:
    files = _infos(SAMPLES / "spark-4.3" / "agg-hdfs" / "state" / "0" / "0")
    names = lambda chain: sorted(f.name for f in chain.store_files)  # noqa: E731
    assert names(needed_files(files, 1)) == sorted(f.name for f in files)
    # Version 9 needs version 8: snapshot 6, deltas 7 and 8.
    assert names(needed_files(files, 9)) == sorted(
        [
            *("6.snapshot", "6.delta", "7.delta", "8.delta", "9.delta", "9.snapshot"),
            *("10.delta", "11.delta", "12.delta", "12.snapshot"),
        ]
    )
    # Below the first snapshot nothing can be left out.
    assert names(needed_files(files, 3)) == sorted(f.name for f in files)


def test_memory_file_system_serves_the_planned_files_only(tmp_path: Path) -> None:
    store = "s3://b/cp/state/0/0"
    files = (FileInfo("1.delta", False, 3, 1.0),)
    ssts = (FileInfo("a.sst", False, 2, 1.0),)
    fs = MemoryFileSystem(store, files, ssts, {f"{store}/1.delta": b"abc"})
    assert fs.read(f"{store}/1.delta") == b"abc"
    assert [f.name for f in fs.list(store)] == ["1.delta", "SSTs"]
    assert fs.is_dir(f"{store}/SSTs") and fs.list(f"{store}/SSTs") == list(ssts)
    assert fs.stat(f"{store}/1.delta") == files[0] and fs.stat(f"{store}/2.delta") is None
    with pytest.raises(CheckpointError, match="disappeared"):
        fs.read(f"{store}/SSTs/a.sst")


def test_the_zip_holds_our_pure_python_packages_only() -> None:
    names = zipfile.ZipFile(shipped_zip()).namelist()
    files = [n for n in names if not n.endswith("/")]
    assert "stateglass/collectors/scan/chains.py" in files
    assert "stateglass/parsers/hdfs_files.py" in files
    assert "stateglass/collectors/engines/executor.py" in files
    assert all(n.endswith(".py") for n in files)
    # The namespace has no __init__.py: zipimport finds it by its folder entry.
    assert "stateglass/" in names and "stateglass/__init__.py" not in names
    assert not any(n.startswith(("stateglass/app/", "tests/")) for n in names)
    assert build_zip() == build_zip()  # deterministic: the digest names the content


_WORKER = """
import json, site, sys
import collectors                      # the decoy: another job's module of that name
assert getattr(collectors, "DECOY", False), collectors
# As PySpark's worker does with addPyFile: the zip goes in at sys.path[1].
sys.path.insert(1, sys.argv[1])
import stateglass.collectors.scan.chains, stateglass.collectors.engines.executor
from stateglass.parsers import hdfs_files as records
mods = {{n: getattr(m, "__file__", None) for n, m in sys.modules.items()
        if n.startswith("stateglass.")}}
print(json.dumps({{"mods": mods, "decoy": collectors.__file__,
                  "speedups": records._speedups is not None}}))
"""


def test_the_zip_runs_beside_a_decoy_without_a_guard(tmp_path: Path) -> None:
    # -S: the venv's packages arrive as a plain path entry, whose .pth files (the editable
    # install among them) do not run: StateGlass comes from the zip or not at all, as on a
    # cluster's worker.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DECOY), VENV_SITE])}
    proc = subprocess.run(
        [sys.executable, "-S", "-c", _WORKER.format(), shipped_zip()],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    prefix = shipped_zip() + os.sep
    assert len(out["mods"]) > 10
    assert all(f and f.startswith(prefix) for f in out["mods"].values()), out["mods"]
    assert out["decoy"].startswith(str(DECOY))
    # The compiled speedups cannot come from a zip: the pure-Python path runs instead.
    assert out["speedups"] is False
    assert str(ROOT) not in json.dumps(out["mods"])


def test_no_java_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = str(tmp_path)  # nothing there: no java
    stateglass = str(Path(sys.executable).parent / "stateglass")
    checkpoint = str(SAMPLES / "spark-4.3" / "agg-hdfs")
    proc = subprocess.run(
        [
            stateglass,
            "collect",
            checkpoint,
            "--db",
            str(tmp_path / "sg.duckdb"),
            "--engine",
            "spark",
            "--master",
            "local[1]",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "stateglass: error: --engine spark: no Java found: install a JDK 17+ or set JAVA_HOME\n"
    )
