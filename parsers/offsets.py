"""Source offsets as positions: where a streaming source stands, in what unit.

Spark writes each source's offset as JSON text whose shape depends on the source. A batch's
input is its position minus the previous batch's, so this module turns the text into a number
and a unit, and nothing more: which batches to subtract, and reading the file source's log,
are the caller's.

Example::

    >>> offset_position('{"topic": {"0": 12, "1": 40}}')
    (52.0, 'records')
    >>> offset_position("15") == (15.0, BARE_NUMBER)
    True
    >>> rate_source_rows('[{"description": "RateStreamV2[rowsPerSecond=5]", "numInputRows": 50}]')
    50.0
"""

from __future__ import annotations

import json
from typing import Any

# The unit of a bare-number offset (Spark's LongOffset): the socket and memory sources count
# rows with it, the rate source seconds. The offset alone does not say which source it is,
# so it is shown as it is: the steps the number advanced.
BARE_NUMBER = "offset steps"
# A bare-number offset known to be the rate source's (its ``sources/<id>/`` log, or Spark's
# progress events, say so): seconds of generated input, rows = rowsPerSecond × seconds.
RATE_SECONDS = "rate seconds"
# The unit of a file source's offset: a batch of its ``sources/<id>/`` log, not files.
FILE_LOG = "file log"
# How Spark's progress events describe the rate source (``RateStreamV2[rowsPerSecond=…]``).
RATE_DESCRIPTION = "RateStreamV2"


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kafka_total(offset: Any) -> int | None:
    """Sum of every topic partition's offset: ``{"topic": {"0": 12, "1": 40}}``."""
    if not isinstance(offset, dict) or not offset:
        return None
    total = 0
    for partitions in offset.values():
        if not isinstance(partitions, dict) or not partitions:
            return None
        for value in partitions.values():
            if not _count(value):
                return None
            # -1 / -2 stand for latest / earliest before a partition was first read.
            total += max(value, 0)
    return total


def offset_position(offset_json: str) -> tuple[float, str] | None:
    """Where a source stands, and in what unit, from the offset JSON Spark wrote.

    * Kafka ``{"topic": {"0": 12}}``: the sum of partition offsets, in records.
    * rate-micro-batch ``{"offset": N, "timestamp": T}``: rows generated so far.
    * a bare number ``N`` (Spark's LongOffset: socket, memory, rate…): :data:`BARE_NUMBER`,
      the source unknown (the caller may know it is a rate source: :data:`RATE_SECONDS`).
    * file source ``{"logOffset": N}``: the batch of the file-source log (:data:`FILE_LOG`).

    ``None`` for any other source, or text that is not JSON.
    """
    try:
        offset = json.loads(offset_json)
    except (TypeError, ValueError):
        return None
    if _count(offset):
        return float(offset), BARE_NUMBER
    if not isinstance(offset, dict):
        return None
    if set(offset) == {"logOffset"} and isinstance(offset["logOffset"], int):
        return float(offset["logOffset"]), FILE_LOG
    if "offset" in offset and "timestamp" in offset and isinstance(offset["offset"], int):
        return float(offset["offset"]), "rows"
    kafka = _kafka_total(offset)
    return None if kafka is None else (float(kafka), "records")


def _json_list(text: Any) -> list[Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def batch_positions(source_offsets_json: Any) -> list[tuple[str, float, str]]:
    """``(source_id, position, unit)`` of each source of one batch that has a known position.

    ``source_offsets_json`` is the history database's ``batches.source_offsets``: a JSON list
    of ``{"source_id": …, "offset": <Spark's offset text or null>}``. Anything else gives ``[]``.
    """
    out = []
    for source in _json_list(source_offsets_json):
        if not isinstance(source, dict):
            continue
        offset = source.get("offset")
        position = offset_position(offset) if isinstance(offset, str) else None
        if position is not None:
            out.append((str(source.get("source_id")), *position))
    return out


def rate_source_rows(sources_json: Any) -> float | None:
    """``numInputRows`` of the one rate source in a progress event's ``sources`` JSON list.

    ``None`` without a rate source, or with several (which of them is which source id is not
    said), or when the count is missing.
    """
    rates = [
        s
        for s in _json_list(sources_json)
        if isinstance(s, dict) and str(s.get("description", "")).startswith(RATE_DESCRIPTION)
    ]
    rows = rates[0].get("numInputRows") if len(rates) == 1 else None
    if isinstance(rows, int | float) and not isinstance(rows, bool):
        return float(rows)
    return None
