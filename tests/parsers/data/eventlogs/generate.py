"""Regenerate the real event logs in this directory (one small query per codec).

Runs ``sample_checkpoints/progress_query.py`` once per codec and keeps, per codec, the event
log Spark wrote and the query's own ``recentProgress`` (the oracle of
``tests/parsers/test_eventlog.py``). The uncompressed log is stored gzipped (byte-exact; the
test unpacks it) to stay small. Usage, from the repository root::

    .venv/bin/python tests/parsers/data/eventlogs/generate.py
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
# codec -> extra arguments: lz4 also covers the single-file layout.
RUNS = {
    "lz4": ["--single-file"],
    "snappy": [],
    "lzf": [],
    "none": [],
}


def main() -> None:
    for codec, extra in RUNS.items():
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "sample_checkpoints" / "progress_query.py"),
                    "--out",
                    str(out),
                    "--codec",
                    codec,
                    "--batches",
                    "2",
                    *extra,
                ],
                check=True,
            )
            target = HERE / codec
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(out / "eventlog", target, ignore=shutil.ignore_patterns(".*"))
            shutil.copy(out / "recent_progress.json", target / "recent_progress.json")
            if codec == "none":
                for path in target.rglob("events_*"):
                    path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
                    path.unlink()


if __name__ == "__main__":
    main()
