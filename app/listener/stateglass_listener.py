"""StateGlassListener: write every streaming query progress as one JSON line into a directory.

A single file with no dependency but pyspark, for Python 3.9 and up (it runs in the user's
driver, not in StateGlass's environment), so it can be shipped with ``--py-files``::

    from stateglass_listener import StateGlassListener
    spark.streams.addListener(StateGlassListener("/data/progress/my-app"))

then ``stateglass collect CHECKPOINT --progress /data/progress/my-app``.

Each progress is written as ``StreamingQueryProgress.json`` on one line; query starts and ends
as ``{"stateglassEvent": "QueryStarted" | "QueryTerminated", ...}`` lines. Files are named
``progress-<UTC start>-<pid>-<n>.jsonl``, rotated at ``max_bytes`` and pruned to the newest
``max_files``. The query is never blocked: Spark's listener thread only puts the event's JSON
on a bounded queue; a background thread writes it. When the queue is full the event is
dropped and counted (``dropped``).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

__all__ = ["StateGlassListener"]

_STOP = object()
PREFIX = "progress-"
SUFFIX = ".jsonl"


def _progress_json(progress: Any) -> str:
    """The progress as Spark's JSON. PySpark 4 builds it from ``jsonValue()`` (whose ids are
    ``uuid.UUID``, so ``str`` them); PySpark 3.5 asks the JVM for ``json``."""
    json_value = getattr(progress, "jsonValue", None)
    if callable(json_value):
        return json.dumps(json_value(), default=str, separators=(",", ":"))
    text = progress.json
    return str(text() if callable(text) else text)


class StateGlassListener(StreamingQueryListener):
    """Append each query progress to JSON-lines files in ``directory`` (see module docs)."""

    def __init__(
        self,
        directory: str,
        max_bytes: int = 64 * 1024 * 1024,
        max_files: int = 20,
        queue_size: int = 10000,
    ) -> None:
        super().__init__()
        self.directory = os.path.abspath(directory)
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.dropped = 0
        self.written = 0
        self.last_error: str | None = None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._file: Any | None = None
        self._file_size = 0
        self._file_count = 0
        os.makedirs(self.directory, exist_ok=True)
        self._thread = threading.Thread(target=self._run, name="stateglass-listener", daemon=True)
        self._thread.start()

    # Spark's listener bus calls these; they must return at once.
    def onQueryStarted(self, event: Any) -> None:
        self._offer(
            {
                "stateglassEvent": "QueryStarted",
                "id": str(event.id),
                "runId": str(event.runId),
                "name": event.name,
                "timestamp": getattr(event, "timestamp", None),
            }
        )

    def onQueryProgress(self, event: Any) -> None:
        # Serialized here, while Spark's event object is surely alive; microseconds.
        try:
            self._offer(_progress_json(event.progress))
        except Exception as exc:
            self.dropped += 1
            self.last_error = repr(exc)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        self._offer(
            {
                "stateglassEvent": "QueryTerminated",
                "id": str(event.id),
                "runId": str(event.runId),
                "exception": event.exception,
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            }
        )

    def wait_written(self, count: int, timeout: float = 30.0) -> bool:
        """Wait until ``count`` lines are written (Spark delivers events asynchronously, so
        the last progress may arrive after ``query.stop()`` returns); True if they were."""
        deadline = time.monotonic() + timeout
        while self.written + self.dropped < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.written + self.dropped >= count

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop the writer thread (call after the queries stop)."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)

    def _offer(self, item: Any) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            try:
                if isinstance(item, dict):
                    line = json.dumps(item, default=str, separators=(",", ":"))
                elif "\n" in item:
                    # Pretty-printed by some PySpark: one progress must stay one line.
                    line = json.dumps(json.loads(item), separators=(",", ":"))
                else:
                    line = item
                self._write(line + "\n")
                self.written += 1
            except Exception as exc:
                self.dropped += 1
                self.last_error = repr(exc)
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write(self, line: str) -> None:
        data = line.encode("utf-8")
        if self._file is None or self._file_size + len(data) > self.max_bytes:
            self._rotate()
        assert self._file is not None
        # One write and a flush per line: a reader sees whole lines, or a cut last line it
        # skips until complete.
        self._file.write(data)
        self._file.flush()
        self._file_size += len(data)

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file_count += 1
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        name = f"{PREFIX}{stamp}-{os.getpid()}-{self._file_count:06d}{SUFFIX}"
        # Kept open across calls (closed at rotation and in close()).
        self._file = open(os.path.join(self.directory, name), "ab")  # noqa: SIM115
        self._file_size = 0
        self._prune()

    def _prune(self) -> None:
        mine = f"-{os.getpid()}-"
        names = sorted(n for n in os.listdir(self.directory) if n.startswith(PREFIX) and mine in n)
        for name in names[: max(0, len(names) - self.max_files)]:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(self.directory, name))
