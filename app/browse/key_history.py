"""One key through every retained version: its value where present, marked where absent.

Example::

    view = StateView("/data/cp")
    ref = find_keys(view, version=12, search="user07")[0]
    table = key_history(view, ref, versions(view))
    print(table.to_pylist())   # batch_id, version, status, then the value's columns
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import pyarrow as pa
from plotly.subplots import make_subplots

from stateglass.app.browse.cells import RAW_MS
from stateglass.app.browse.store import CACHE, PartitionCache, PartitionData, iter_partitions
from stateglass.app.browse.store import key_json_renderer as _key_json_renderer
from stateglass.app.browse.table import decode_rows, flattener, last, matching_rows
from stateglass.app.errors import AppError
from stateglass.app.escape import plot_text
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import StateView, identity_width, open_source
from stateglass.parsers.partitioning import key_partition
from stateglass.parsers.sparktypes import StructType

STATUSES = ("present", "added", "changed", "unchanged", "removed", "absent")
_PLAIN = re.compile(r"[\w .:@/+-]+", re.ASCII)
NUMERIC = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)


@dataclass(frozen=True)
class KeyRef:
    """A stored key: its partition, its bytes, and its JSON text (for people)."""

    partition: int
    key: bytes
    label: str


def _ref(view: StateView, data: PartitionData, item: int) -> KeyRef:
    source = open_source(view)
    render = _key_json_renderer(source.row_codec)
    key, value = data.keys[item].as_py(), data.values[item].as_py()
    with source.decoding(data.partition):
        label = render(source.row_codec.rows(key, value)[0])
    return KeyRef(data.partition, key, label)


def find_keys(
    view: StateView,
    version: int,
    search: str,
    limit: int = 20,
    *,
    cache: PartitionCache = CACHE,
    jobs: int = 1,
) -> list[KeyRef]:
    """Up to ``limit`` keys at ``version`` containing ``search`` (any case), in store order."""
    keyed = view.keyed(open_source(view).row_codec)
    source = open_source(keyed)
    found: list[KeyRef] = []
    held = source.partitions_for(version - 1)  # a repartition changes them
    for data in iter_partitions(keyed, version, held, search=bool(search), cache=cache, jobs=jobs):
        rows = matching_rows(data, search)
        items = range(data.num_items) if rows is None else rows
        for item in items[: limit - len(found)]:
            found.append(_ref(keyed, data, int(item)))
        if len(found) >= limit:
            break
    return found


def find_keys_back(
    view: StateView,
    versions: Sequence[int],
    search: str,
    limit: int = 20,
    *,
    cache: PartitionCache = CACHE,
) -> tuple[int | None, list[KeyRef]]:
    """The newest of ``versions`` where some key contains ``search``, and those keys: a key
    that was removed (evicted, expired) is found in an older retained version. ``(None,
    [])`` when no retained version holds one."""
    for version in sorted(versions, reverse=True):
        found = find_keys(view, version, search, limit, cache=cache)
        if found:
            return version, found
    return None, []


def timeline(table: pa.Table) -> str:
    """When the key was added, last changed and removed, in batch ids, from a history table
    (:func:`iter_history`): ``added at batch 3, last changed at batch 6, removed at batch 9
    (version 10)``; empty when it never changed within the retained versions."""
    said = []
    statuses = table.column("status").to_pylist()
    batches = table.column("batch_id").to_pylist()
    events = list(zip(statuses, batches, strict=True))
    added = [b for st, b in events if st == "added"]
    if added:
        said.append(f"added at batch {added[-1]}")
    elif statuses and statuses[0] == "present":
        # Batch 0 is the query's first: nothing came before it.
        first = batches[0]
        said.append(
            "added at batch 0"
            if first == 0
            else f"present at batch {first} (the oldest retained version)"
        )
    changed = [b for st, b in events if st == "changed"]
    if changed:
        said.append(f"last changed at batch {changed[-1]}")
    removed = [b for st, b in events if st == "removed"]
    if removed:
        said.append(f"removed at batch {removed[-1]} (version {removed[-1] + 1})")
        if added and added[-1] > removed[-1]:
            said[-1] += ", then added again"
    return ", ".join(said)


def _normal(text: str) -> Any:
    """JSON text -> a value that compares equal for equal JSON (numbers exact)."""
    return json.loads(text, parse_float=Decimal, parse_int=Decimal)


def find_key_json(
    view: StateView,
    versions: Sequence[int],
    text: str,
    *,
    cache: PartitionCache = CACHE,
    jobs: int = 1,
) -> KeyRef | None:
    """The key whose JSON equals ``text`` (as Spark writes it), newest version first."""
    try:
        wanted = _normal(text)
    except ValueError as exc:
        raise AppError(f"not a JSON key: {exc}") from exc
    keyed = view.keyed(open_source(view).row_codec)
    source = open_source(keyed)
    # Narrow with the key's string fields when it has some: the search text holds them.
    # (only plain ASCII ones: others may be escaped differently in the JSON text).
    strings = [s for s in _strings(wanted) if _PLAIN.fullmatch(s)]
    hint = max(strings, key=len) if strings else ""
    # Spark's hash partitioning names the key's partition: look there first (every
    # version), elsewhere only when it is not there (a key type not covered, a store keyed
    # otherwise), so a pasted key costs one partition, not the store. A repartition moves
    # the key: each version has its own partitions and its own home.
    newest_first = sorted(versions, reverse=True)
    homes = {v: _home_partition(source, wanted, source.partitions_for(v - 1)) for v in versions}
    for version in newest_first:
        home = homes[version]
        if home is not None:
            ref = _find_in(keyed, version, [home], wanted, hint, cache, jobs)
            if ref is not None:
                return ref
    for version in newest_first:
        others = [p for p in source.partitions_for(version - 1) if p != homes[version]]
        ref = _find_in(keyed, version, others, wanted, hint, cache, jobs)
        if ref is not None:
            return ref
    return None


def _home_partition(source: StateSource, wanted: Any, partitions: Sequence[int]) -> int | None:
    """The partition Spark's shuffle sends this key to among ``partitions`` (the store's at
    one version), when the key's types allow."""
    codec = source.row_codec
    key = wanted
    if identity_width(codec) != 1:
        key = wanted.get("key") if isinstance(wanted, dict) else None
    if not isinstance(key, dict):
        return None
    schema = codec.columns[0][1]  # the grouping key (map and timer keys add a second part)
    if not isinstance(schema, StructType):
        return None
    home = key_partition(schema, key, len(partitions))
    return home if home in partitions else None


def _find_in(
    keyed: StateView,
    version: int,
    partitions: Sequence[int],
    wanted: Any,
    hint: str,
    cache: PartitionCache,
    jobs: int,
) -> KeyRef | None:
    source = open_source(keyed)
    render = _key_json_renderer(source.row_codec)
    for data in iter_partitions(
        keyed, version, partitions, search=bool(hint), cache=cache, jobs=jobs
    ):
        rows = matching_rows(data, hint)
        items = range(data.num_items) if rows is None else rows
        for item in items:
            key, value = data.keys[int(item)].as_py(), data.values[int(item)].as_py()
            with source.decoding(data.partition):
                label = render(source.row_codec.rows(key, value)[0])
            if _normal(label) == wanted:
                return KeyRef(data.partition, key, label)
    return None


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def iter_history(
    view: StateView,
    ref: KeyRef,
    versions: Sequence[int],
    *,
    cache: PartitionCache = CACHE,
) -> Iterator[tuple[float, pa.Table | None]]:
    """(fraction done, None) per version read, then (1.0, the history table).

    Only the key's partition is read, and its chain is replayed once across all the
    versions, keeping only this key (``StateSource.lookup``): a history over N versions
    costs one rebuild of one partition, not N, and caches nothing. ``cache`` is accepted
    for callers that pass one; the replay does not need it.
    """
    del cache
    keyed = view.keyed(open_source(view).row_codec)
    source = open_source(keyed)
    codec = source.row_codec
    flat = flattener(tuple(codec.columns))
    width = 1 + sum(len(leaves) for _, leaves in flat.groups[: identity_width(codec)])
    names = flat.names[width:]
    columns: dict[str, list[Any]] = {
        n: [] for n in ["batch_id", "version", "status", "partition_id", *names]
    }
    previous: bytes | None = None
    ordered = sorted(versions)
    for n, (version, partition, value) in enumerate(_lookups(source, ref, ordered), start=1):
        columns["batch_id"].append(version - 1)
        columns["version"].append(version)
        columns["status"].append(_status(n == 1, previous, value))
        columns["partition_id"].append(partition)
        if value is None:
            cells: list[Any] = [None] * len(names)
        else:
            data = PartitionData(
                partition,
                pa.array([ref.key], type=pa.large_binary()),
                pa.array([value], type=pa.large_binary()),
            )
            [(p, row)] = decode_rows(source, data, [0])
            cells = flat.cells(p, row)[width:]
        for name, cell in zip(names, cells, strict=True):
            columns[name].append(cell)
        previous = value
        yield n / len(ordered), None
    types = [pa.int64(), pa.int64(), pa.string(), pa.int64(), *flat.types[width:]]
    table = pa.table(
        [pa.array(v, type=t) for v, t in zip(columns.values(), types, strict=True)],
        names=list(columns),
    )
    yield 1.0, table


def _lookups(
    source: StateSource, ref: KeyRef, ordered: list[int]
) -> Iterator[tuple[int, int, bytes | None]]:
    """``(version, partition, value or None)`` of the key at each version, ascending.

    A repartition (Spark 4.2+) moves the key to another partition: each run of versions
    with one partition count is looked up in the key's partition there (all of that run's
    partitions when its types do not say which).
    """
    eras: list[tuple[list[int], list[int]]] = []
    for version in ordered:
        held = source.partitions_for(version - 1)
        if eras and eras[-1][0] == held:
            eras[-1][1].append(version)
        else:
            eras.append((held, [version]))
    for held, era in eras:
        candidates = [ref.partition]
        if len(eras) > 1:
            home = _home_partition(source, _normal(ref.label), held)
            candidates = [home] if home is not None else held
        found: dict[int, tuple[int, bytes]] = {}
        for partition in candidates:
            for version, values in source.lookup(partition, (ref.key,), era):
                if ref.key in values and version not in found:
                    found[version] = (partition, values[ref.key])
        for version in era:
            partition, value = found.get(version, (candidates[0], None))
            yield version, partition, value


def _status(first: bool, previous: bytes | None, value: bytes | None) -> str:
    if value is None:
        return "absent" if first or previous is None else "removed"
    if first:
        return "present"
    if previous is None:
        return "added"
    return "unchanged" if previous == value else "changed"


def collapse_absent(table: pa.Table) -> pa.Table:
    """The leading run of "absent" rows (versions before the key first appears) as one row,
    ``absent in versions 1..117``, at its first version: a long history would otherwise open
    on a screenful of empty rows."""
    statuses = table.column("status").to_pylist()
    run = next((i for i, s in enumerate(statuses) if s != "absent"), len(statuses))
    if run < 2:
        return table
    versions = table.column("version").to_pylist()
    head = table.slice(0, 1)
    status = pa.array([f"absent in versions {versions[0]}..{versions[run - 1]}"], pa.string())
    head = head.set_column(head.schema.get_field_index("status"), "status", status)
    return pa.concat_tables([head, table.slice(run)])


def key_history(view: StateView, ref: KeyRef, versions: Sequence[int], **kwargs: Any) -> pa.Table:
    """:func:`iter_history`'s table."""
    table = last(iter_history(view, ref, versions, **kwargs))[1]
    assert table is not None
    return table


def numeric_columns(table: pa.Table) -> list[str]:
    """Value columns of a history table that hold numbers (and some of them non-null)."""
    skip = {"batch_id", "version", "status", "partition_id"}
    return [
        f.name
        for f in table.schema
        if f.name not in skip
        and any(test(f.type) for test in NUMERIC)
        and table.column(f.name).null_count < len(table)
    ]


def history_figure(
    frame: pd.DataFrame, columns: Sequence[str], partition: int | None = None
) -> go.Figure:
    """Numeric value fields over versions, one small chart each (own scale, shared x axis).

    Hover names the key's partition (when given), the version, the batch and the key's
    status; absent versions leave gaps.
    """
    where = "" if partition is None else f"partition {partition} · "
    fig = make_subplots(
        rows=len(columns), cols=1, shared_xaxes=True, vertical_spacing=0.06 if columns else 0
    )
    for row, name in enumerate(columns, start=1):
        # An epoch-millisecond field by Spark's contract: a time axis, the raw long on hover.
        raw_ms = frame.get(f"{name}{RAW_MS}")
        if raw_ms is None:
            y = pd.to_numeric(frame[name], errors="coerce")
            shown, raw = "%{y}", ""
        else:
            y = pd.to_datetime(pd.to_numeric(raw_ms, errors="coerce"), unit="ms")
            shown, raw = "%{y|%Y-%m-%d %H:%M:%S.%L} UTC", " (%{customdata[2]} ms)"
        fig.add_trace(
            go.Scatter(
                x=frame["version"],
                y=y,
                mode="lines+markers",
                # Field names come from the checkpoint's schema: plain text, not markup.
                name=plot_text(name),
                customdata=pd.concat(
                    [frame[["batch_id", "status"]], (raw_ms if raw_ms is not None else y)], axis=1
                ).to_numpy(),
                hovertemplate=(
                    f"{plot_text(name)}: {shown}{raw}<br>{where}version %{{x}} · "
                    "batch %{customdata[0]}<br>%{customdata[1]}<extra></extra>"
                ),
            ),
            row=row,
            col=1,
        )
        fig.update_yaxes(title_text=plot_text(name), row=row, col=1)
    fig.update_xaxes(title_text="state version (batch id + 1)", row=len(columns), col=1)
    fig.update_xaxes(dtick=1 if len(frame) <= 30 else None)
    fig.update_layout(
        showlegend=False,
        margin={"l": 10, "r": 10, "t": 20, "b": 10},
        height=60 + 170 * len(columns),
    )
    return fig


__all__ = [
    "KeyRef",
    "find_key_json",
    "find_keys",
    "find_keys_back",
    "history_figure",
    "iter_history",
    "key_history",
    "numeric_columns",
    "timeline",
]
