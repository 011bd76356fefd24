"""Real queries' ``StreamingQueryProgress`` JSON into the progress tables, through the real
ingest path: written as the StateGlass listener writes them (one JSON object per line in
``progress-*.jsonl``) into a directory beside the checkpoint, then read by
``stateglass.collectors.progress.ProgressCollector`` as ``stateglass collect --progress DIR`` does.

The JSON comes from ``query.recentProgress`` of queries the tests run on the shared ``spark``
fixture.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from stateglass.collectors.db.writer import Database
from stateglass.collectors.progress import ProgressCollector


def write_events(db_path: str, events: Iterable[dict[str, Any]], directory: str) -> int:
    """Write ``events`` as a listener file under ``directory`` and collect it; how many."""
    lines = [json.dumps(e, separators=(",", ":")) + "\n" for e in events]
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    existing = len(list(folder.glob("progress-*.jsonl")))
    if lines:
        (folder / f"progress-20260101T000000Z-1-{existing}.jsonl").write_text("".join(lines))
    ProgressCollector(Database(db_path)).collect(str(folder))
    return len(lines)
