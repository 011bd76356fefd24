"""The file source's log read for input counts (``collectors/checkpoints/source_log.py``)."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

from stateglass.collectors.checkpoints.source_log import files_per_log_batch
from stateglass.parsers.logs import parse_file_source_log
from tests.conftest import SAMPLES

FILE_SOURCE = SAMPLES / "spark-4.3" / "agg-hdfs"


def _log(*entries: tuple[str, int]) -> str:
    lines = [json.dumps({"path": p, "timestamp": 1, "batchId": b}) for p, b in entries]
    return "\n".join(["v1", *lines])


def test_counts_match_every_entry_of_the_sample_log() -> None:
    log = FILE_SOURCE / "sources" / "0"
    paths: dict[int, set[str]] = defaultdict(set)
    for f in log.iterdir():
        if not f.name.startswith("."):
            for entry in parse_file_source_log(f.read_bytes()):
                paths[entry.batch_id].add(entry.path)
    counts = files_per_log_batch(str(FILE_SOURCE), "0")
    assert counts == {b: len(p) for b, p in paths.items()}
    assert sorted(counts) == list(range(12))  # the compact file's batches included


def test_a_compact_file_counts_each_file_once(tmp_path: Path) -> None:
    cp = tmp_path / "cp"
    shutil.copytree(FILE_SOURCE / "offsets", cp / "offsets")
    log = cp / "sources" / "0"
    log.mkdir(parents=True)
    (log / "0").write_text(_log(("a", 0), ("b", 0)))
    (log / "1").write_text(_log(("c", 1)))
    (log / "2.compact").write_text(_log(("a", 0), ("b", 0), ("c", 1), ("d", 2)))
    (log / "3").write_text(_log(("e", 3), ("f", 3)))
    # Temporary and checksum files are not the log.
    (log / ".4.crc").write_text("x")
    (log / ".4.0b1c.tmp").write_text(_log(("g", 4)))
    assert files_per_log_batch(str(cp), "0") == {0: 2, 1: 1, 2: 1, 3: 2}


def test_what_cannot_be_read_counts_nothing(tmp_path: Path) -> None:
    assert files_per_log_batch(str(tmp_path / "missing"), "0") == {}
    assert files_per_log_batch(str(FILE_SOURCE), "7") == {}  # no such source
    cp = tmp_path / "cp"
    shutil.copytree(FILE_SOURCE / "offsets", cp / "offsets")
    log = cp / "sources" / "0"
    log.mkdir(parents=True)
    # Kafka keeps its initial offsets under sources/ too: not a file-source log.
    (log / "0").write_bytes(b'\x00\x00\x00\x02{"t":{"0":0}}')
    assert files_per_log_batch(str(cp), "0") == {}
