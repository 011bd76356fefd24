"""Discovery: a folder of checkpoints is searched within bounds, and bad entries are skipped
with one warning each while the healthy checkpoints beside them are collected."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from stateglass.app import discovery
from stateglass.app.commands.dashboard import _collect_for_dashboard
from stateglass.collectors.checkpoints.discover import Limits, checkpoints_at, discover
from stateglass.collectors.db.read import read_query
from stateglass.collectors.errors import NotACheckpoint
from stateglass.collectors.fs import LOCAL
from tests.collectors.cluster import VENV_SITE
from tests.collectors.helpers import ROOT, SAMPLES, ListingFileSystem, copy_sample


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """prod/{agg,join}, dev/agg, deep/a/b/c/agg, and a symlink loop at the top."""
    root = tmp_path / "fleet"
    for rel, sample in [
        ("prod", "spark-4.3/agg-hdfs"),
        ("prod", "spark-4.3/join-hdfs"),
        ("dev", "spark-4.3/agg-hdfs"),
        ("deep/a/b/c", "spark-4.3/agg-hdfs"),
    ]:
        (root / rel).mkdir(parents=True, exist_ok=True)
        copy_sample(sample, root / rel)
    (root / "loop").symlink_to("loop")  # ELOOP on every stat
    (root / "ping").symlink_to("pong")
    (root / "pong").symlink_to("ping")
    (root / "prod" / "again").symlink_to(root)  # a link back up: searched once
    (root / "notes.txt").write_text("not a checkpoint")
    return root


def _rel(paths: list[str] | tuple[str, ...], root: Path) -> list[str]:
    return sorted(os.path.relpath(p, root) for p in paths)


ALL = [
    "deep/a/b/c/spark-4.3-agg-hdfs",
    "dev/spark-4.3-agg-hdfs",
    "prod/spark-4.3-agg-hdfs",
    "prod/spark-4.3-join-hdfs",
]


def test_finds_every_checkpoint_and_warns_once_per_loop(fleet: Path) -> None:
    warnings: list[str] = []
    found = checkpoints_at(LOCAL, str(fleet), Limits(), warnings.append)
    assert _rel(found, fleet) == ALL
    assert sorted(w.split(":")[0] for w in warnings) == [
        f"skipped {fleet}/loop",
        f"skipped {fleet}/ping",
        f"skipped {fleet}/pong",
    ]
    assert all("symbolic links" in w for w in warnings)


def test_bounds_and_globs(fleet: Path) -> None:
    found = discover(LOCAL, str(fleet), Limits(max_depth=2))
    assert _rel(found.checkpoints, fleet) == ALL[1:]
    assert found.stopped is None and found.too_deep > 0
    found = discover(LOCAL, str(fleet), Limits(max_checkpoints=2))
    assert len(found.checkpoints) == 2 and found.stopped == "limit of 2 checkpoints"
    found = discover(LOCAL, str(fleet), Limits(max_seconds=0.0))
    assert found.checkpoints == () and found.stopped == "time limit of 0 s"
    found = discover(LOCAL, str(fleet), Limits(include=("prod/*",)))
    assert _rel(found.checkpoints, fleet) == ALL[2:]
    found = discover(LOCAL, str(fleet), Limits(exclude=("deep", "*join*")))
    assert _rel(found.checkpoints, fleet) == ALL[1:3]


def test_through_the_file_system_protocol(fleet: Path) -> None:
    """What a URL goes through: fs.names() only, each folder listed once, none inside a
    checkpoint (the loops are dropped by names(), silently)."""
    fs = ListingFileSystem()
    found = discover(fs, str(fleet), Limits())
    assert _rel(found.checkpoints, fleet) == ALL
    assert len(fs.listed) == len(set(fs.listed))
    assert not any("/state" in p or p.endswith(("/offsets", "/commits")) for p in fs.listed)


def test_within_keeps_the_search_inside(fleet: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    copy_sample("spark-4.3/agg-hdfs", outside)
    (fleet / "dev" / "escape").symlink_to(outside)
    found = discover(LOCAL, str(fleet), Limits(within=(os.path.realpath(fleet),)))
    assert _rel(found.checkpoints, fleet) == ALL
    assert "dev/escape/spark-4.3-agg-hdfs" in _rel(discover(LOCAL, str(fleet)).checkpoints, fleet)


def test_not_a_checkpoint_and_nothing_below(tmp_path: Path) -> None:
    (tmp_path / "empty" / "a").mkdir(parents=True)
    with pytest.raises(NotACheckpoint, match="none below it"):
        checkpoints_at(LOCAL, str(tmp_path / "empty"))
    with pytest.raises(NotACheckpoint, match="no such file"):
        checkpoints_at(LOCAL, str(tmp_path / "missing"))


def test_progress_lines_on_a_pipe() -> None:
    out = io.StringIO()
    progress = discovery.SearchProgress("/data", out, every_s=0.0)
    progress(10, 1)
    progress(20, 2)
    progress.done()
    assert out.getvalue().splitlines() == [
        "searching /data: 10 folders, 1 checkpoints",
        "searching /data: 20 folders, 2 checkpoints",
    ]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stateglass.app.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_collect_folder_with_a_loop_collects_the_rest(fleet: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "db.duckdb")
    result = _cli("collect", str(fleet), "--db", db)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert sum("warning: skipped" in line for line in lines) == 3
    assert "collected 4 checkpoint(s)" in result.stderr
    assert "Traceback" not in result.stderr
    rows = read_query(db, "SELECT checkpoint FROM checkpoints")
    assert _rel([r[0] for r in rows], fleet) == ALL


def test_dashboard_folder_with_a_loop_collects_the_rest(fleet: Path, tmp_path: Path) -> None:
    roots = _collect_for_dashboard([str(fleet)], str(tmp_path / "db.duckdb"))
    assert _rel(roots, fleet) == ALL


SYSTEM_PYTHON = "/usr/bin/python3"
FIND_AS_NOBODY = """
import json, sys
from stateglass.collectors.checkpoints.discover import Limits, checkpoints_at
from stateglass.collectors.fs import LOCAL
warnings = []
found = checkpoints_at(LOCAL, sys.argv[1], Limits(), warnings.append)
print(json.dumps([found, warnings]))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="needs root and /usr/bin/python3 to search as another user",
)
def test_an_unreadable_folder_is_skipped_with_one_warning() -> None:
    """Root reads everything, so the search runs as ``nobody``, with the system interpreter
    (ours may live in root's home), with the namespace and this venv's packages on its path."""
    top = tempfile.mkdtemp(prefix="sg-unreadable-")
    fleet = Path(top) / "fleet"
    try:
        (fleet / "ok").mkdir(parents=True)
        copy_sample("spark-4.3/agg-hdfs", fleet / "ok")
        (fleet / "secret" / "x").mkdir(parents=True)
        copy_sample("spark-4.3/agg-hdfs", fleet / "secret" / "x")
        for dirpath, dirnames, _ in os.walk(top):
            for name in [".", *dirnames]:
                os.chmod(os.path.join(dirpath, name), 0o755)
        os.chmod(fleet / "secret", 0o000)
        # The namespace as installed, from links to the repository's folders: the system
        # interpreter has no StateGlass of its own.
        namespace = Path(top) / "path" / "stateglass"
        namespace.mkdir(parents=True)
        for layer in ("collectors", "parsers"):
            (namespace / layer).symlink_to(ROOT / layer)
        os.chmod(namespace.parent, 0o755)
        os.chmod(namespace, 0o755)
        result = subprocess.run(
            [SYSTEM_PYTHON, "-c", FIND_AS_NOBODY, str(fleet)],
            cwd=top,
            env={
                "PATH": os.environ.get("PATH", ""),
                # Our dependencies (lz4…, which opening a checkpoint imports) from this venv.
                "PYTHONPATH": os.pathsep.join([str(namespace.parent), VENV_SITE]),
            },
            capture_output=True,
            text=True,
            timeout=60,
            user=65534,
        )
        assert result.returncode == 0, result.stderr
        found, warnings = json.loads(result.stdout)
        assert found == [str(fleet / "ok" / "spark-4.3-agg-hdfs")]
        assert warnings == [f"skipped {fleet}/secret: cannot list (Permission denied)"]
    finally:
        os.chmod(fleet / "secret", 0o755)
        shutil.rmtree(top)


def test_samples_are_all_found() -> None:
    found = checkpoints_at(LOCAL, str(SAMPLES), Limits(max_depth=4))
    assert len(found) >= 10 and all(os.path.isdir(os.path.join(p, "offsets")) for p in found)


class _MeetingFileSystem(ListingFileSystem):
    """Each listing of a folder below the top waits until ``width`` listings are under way at
    once: a serial walk cannot get past the first (its barrier breaks)."""

    def __init__(self, top: str, width: int) -> None:
        super().__init__()
        self.top = top
        self.meeting = threading.Barrier(width, timeout=30)

    def names(self, path: str) -> list[tuple[str, bool]]:
        if path != self.top:
            self.meeting.wait()
        return super().names(path)


def test_the_folders_of_a_depth_are_listed_at_once(tmp_path: Path) -> None:
    top = tmp_path / "bucket"
    for team in ("a", "b", "c", "d"):
        copy_sample("spark-4.3/agg-hdfs", top / team)
    fs = _MeetingFileSystem(str(top), width=4)
    found = discover(fs, str(top), Limits(max_depth=2, concurrency=4))
    assert _rel(found.checkpoints, top) == [f"{t}/spark-4.3-agg-hdfs" for t in "abcd"]
    # What a serial walk lists, in its order: the depths one after another, each sorted.
    depth_1 = [str(top / t) for t in "abcd"]
    assert sorted(fs.listed[1:5]) == depth_1 and fs.listed[0] == str(top)
