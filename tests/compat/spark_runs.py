"""Helpers for the tests that run real queries and restarts: input files, session confs for one
query start, and Spark's error class read from a failed query."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def write_json(path: Path, rows: list[tuple[int, int, str]]) -> None:
    path.write_text("".join(json.dumps({"k": k, "v": v, "s": s}) + "\n" for k, v, s in rows))


class Confs:
    """Set session confs for one query start, and put the old values back."""

    def __init__(self, spark: Any, confs: dict[str, str]) -> None:
        self.spark, self.confs = spark, confs
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for key, value in self.confs.items():
            self.saved[key] = self.spark.conf.get(key, None)
            self.spark.conf.set(key, value)

    def __exit__(self, *exc: object) -> None:
        for key, value in self.saved.items():
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)


_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)?)\]")


def error_class(exc: BaseException) -> str:
    """Spark's error class of the failure: the innermost Spark error condition on the JVM
    cause chain (the streaming query wraps it in STREAM_FAILED); without one, the class of the
    innermost JVM exception."""
    origin = getattr(exc, "_origin", None)
    found: list[str] = []
    innermost = None
    while origin is not None:
        innermost = str(origin.getClass().getName())
        try:
            condition = origin.getCondition()
        except Exception:
            condition = None
        if condition:
            found.append(str(condition))
        origin = origin.getCause()
    inner = [c for c in found if c != "STREAM_FAILED"]
    if inner:
        return inner[-1]
    if innermost is not None and found:
        return innermost
    classes = [c for c in _CLASS.findall(str(exc)) if c != "STREAM_FAILED"]
    return classes[0] if classes else type(exc).__name__
