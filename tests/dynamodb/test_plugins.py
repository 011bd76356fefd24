"""Provider plugins: a third provider registered through a real entry point is picked up, and
a checkpoint whose provider nobody registered gets one line naming it and the group."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stateglass.app.analysis.health import judge
from stateglass.app.analysis.health.restart import NOT_JUDGED
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from stateglass.collectors.stores import ENTRY_POINT_GROUP, READERS, StoreReader
from tests.conftest import SAMPLES, copy_until

TRIVIAL_CLASS = "example.trivial.TrivialStateStoreProvider"

# A provider that keeps the HDFS provider's records under its own names: N.trivial (a
# version's changes) and N.trivialsnap (a whole version).
PLUGIN = """
from stateglass.collectors.stores.hdfs import HdfsStoreReader


class TrivialReader(HdfsStoreReader):
    CHANGE_KIND = "trivial"
    FULL_KIND = "trivialsnap"

    @staticmethod
    def classify(name):
        head, _, tail = name.partition(".")
        if head.isdigit() and tail in ("trivial", "trivialsnap"):
            return int(head), tail
        return None

    def __init__(self, ctx):
        super().__init__(ctx)
        for f in ctx.listing():
            found = self.classify(f.name)
            if found is not None:
                kind = self.deltas if found[1] == "trivial" else self.snapshots
                kind[found[0]] = f.name
"""


def test_built_in_providers_register_through_the_group() -> None:
    from importlib.metadata import entry_points

    names = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert {"hdfs", "rocksdb", "stateglass.dynamo.DynamoStateStoreProvider"} <= names
    assert names <= set(READERS)


def test_every_registered_reader_answers_every_question_of_the_interface() -> None:
    # The interface grows (differing_keys came with the RocksDB SST diff): a reader written
    # before must not fail with an AttributeError deep inside a diff or a growth reading.
    members = {n for n in vars(StoreReader) if not n.startswith("_")}
    members |= set(StoreReader.__annotations__)
    for name, reader in READERS.items():
        missing = sorted(m for m in members if not hasattr(reader, m))
        assert not missing, f"{name}: {reader.__name__} lacks {missing}"


@pytest.fixture(scope="module")
def trivial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A private copy of an HDFS sample renamed to the trivial provider's files and pinned to
    its class; and a directory holding the plugin as an installed distribution."""
    base = tmp_path_factory.mktemp("trivial")
    cp = base / "checkpoint"
    shutil.copytree(SAMPLES / "spark-4.3" / "agg-hdfs", cp)
    for f in (cp / "state").rglob("*"):
        if f.suffix in (".delta", ".snapshot") and f.name[0].isdigit():
            f.rename(f.with_suffix(".trivial" if f.suffix == ".delta" else ".trivialsnap"))
        elif f.name.endswith(".crc"):
            f.unlink()
    for f in (cp / "offsets").iterdir():
        if f.name.isdigit():
            lines = f.read_text().splitlines()
            meta = json.loads(lines[1])
            meta["conf"]["spark.sql.streaming.stateStore.providerClass"] = TRIVIAL_CLASS
            f.write_text("\n".join([lines[0], json.dumps(meta), *lines[2:]]) + "\n")
            (f.parent / f".{f.name}.crc").unlink()  # as the provider's query wrote it
    site = base / "site"
    site.mkdir()
    (site / "trivial_provider.py").write_text(PLUGIN)
    dist = site / "trivial_provider-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: trivial-provider\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n{TRIVIAL_CLASS} = trivial_provider:TrivialReader\n"
    )
    return cp, site


def test_without_its_plugin_the_restart_verdict_says_the_state_is_not_judged(
    trivial: tuple[Path, Path], tmp_path: Path
) -> None:
    cp, _ = trivial  # the plugin is not importable here: its stores cannot be read
    db = str(tmp_path / "db.duckdb")
    scan_checkpoint(Database(db), str(cp))
    verdict, findings = judge(db, str(cp))
    assert (verdict.verdict, verdict.status) == (NOT_JUDGED, "WARN"), verdict
    assert TRIVIAL_CLASS in verdict.evidence[0]
    assert findings[0].rule == "restart" and findings[0].status == "WARN"


# A watcher's scanner in a process that has the plugin: a scan, the later batches' files
# added, a scan by name (no full listing is due); the newest version it recorded.
WATCH_TWICE = """
import shutil, sys
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.reconcile import ReconcilePolicy
from stateglass.collectors.scan.scanner import Scanner
cp, later, db = sys.argv[1:]
scanner = Scanner(Database(db), reconcile=ReconcilePolicy(every_scans=1000, every_s=1e9))
scanner.scan(cp)
shutil.copytree(later, cp, dirs_exist_ok=True)
scanner.scan(cp)
print(read_query(db, "SELECT max(version) FROM state_versions")[0][0])
"""


def test_a_watcher_records_a_plugin_providers_new_versions(
    trivial: tuple[Path, Path], tmp_path: Path
) -> None:
    cp, site = trivial
    early = copy_until(cp, tmp_path / "cp", 6)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    args = [sys.executable, "-c", WATCH_TWICE, str(early), str(cp), str(tmp_path / "db.duckdb")]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == 12  # batches 0..11: version 12, not the 6 of the first scan


def cli(*args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "stateglass.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_unknown_provider_is_one_line_naming_it_and_the_group(trivial: tuple[Path, Path]) -> None:
    cp, _ = trivial
    for command in (["info", str(cp)], ["state", str(cp), "--batch-id", "2"]):
        proc = cli(*command)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert TRIVIAL_CLASS in lines[0] and ENTRY_POINT_GROUP in lines[0], lines[0]


def test_a_third_provider_is_picked_up_through_its_entry_point(
    trivial: tuple[Path, Path],
) -> None:
    cp, site = trivial
    info = cli("info", str(cp), "--json", path=site)
    assert info.returncode == 0, info.stderr
    assert TRIVIAL_CLASS in info.stdout
    original = SAMPLES / "spark-4.3" / "agg-hdfs"
    for batch in ("5",):
        args = ("--batch-id", batch, "--format", "jsonl", "--jobs", "1")
        got = cli("state", str(cp), *args, path=site)
        want = cli("state", str(original), *args)
        assert got.returncode == 0, got.stderr
        assert want.stdout.strip() and sorted(got.stdout.splitlines()) == sorted(
            want.stdout.splitlines()
        )
