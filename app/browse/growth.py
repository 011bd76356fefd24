"""Growth attribution: which values of which key field bring the new keys.

Definitions (docs/state_forensics.md):

* The window is the last ``n`` versions: from ``base = newest − n`` to ``newest`` (``base`` is
  raised to the oldest version every partition can still rebuild; ``base = 0`` is the empty
  state before the first batch).
* A *new key* is a key in the store at ``newest`` and not at ``base`` (matched on its stored
  bytes, per partition, as Diff does). A key added and evicted inside the window is not new.
* Each new key counts once for every leaf field of its key: a struct field such as ``window``
  counts by ``window.start`` and by ``window.end``. The *share* of a (field, value) is its new
  keys over all new keys, so the shares of one field's values add up to 100 %.
* The chart's *keys added at version v* are keys at v absent at v − 1 (gross: a key evicted
  and added again counts again), for the top contributors' values.

Reading (:mod:`app.browse.rolling`): where every stored item is a row, each partition is
taken at ``base`` as its key set only, then rolled forward through the window: through the
change files (HDFS deltas, RocksDB changelogs), or, for RocksDB zips without changelogs,
through the keys of the SSTs neighbouring versions do not share (a step that compacted is
read whole). The rolled key set is the newest version's, and the keys the window touched
that base did not hold give the new keys with their newest values, so the newest version
is never read whole in the first pass; the second pass reads it for the share of all keys
only when there are contributors to count, keeping the sampled items. Other partitions
(column families, list state, a repartition inside the window) are read whole at ``base``
and ``newest``, rolled between when they can; where nothing rolls, the partition is
rebuilt at each version. All ways give the same figures.

Memory: one partition's key set (or, read whole, two versions of it) at a time, the items
each version of the window added, whole newest versions up to :data:`KEPT_BYTES` (else read
again for the share of all keys), plus one counter per field; a field with more than
:data:`MAX_VALUES` distinct values among the new keys keeps its largest counts only (the
result then says ``approximate``).

Example::

    result = attribute_growth(StateView("/data/cp"), window=10, top=5)
    for c in result.contributors:
        print(f"{c.field} = {c.value}: {c.share:.0%} of the keys added since {result.base}")
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow.compute as pc

from stateglass.app.browse import rolling
from stateglass.app.browse.cells import Flattener, cell_text
from stateglass.app.browse.store import (
    PartitionData,
    every_item_a_row,
    partition_data,
    read_partition,
)
from stateglass.app.browse.table import last
from stateglass.app.errors import AppError
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import (
    StateView,
    identity_width,
    open_source,
    versions,
)

DEFAULT_WINDOW = 10
DEFAULT_TOP = 5
# Distinct values one field may count before only its largest counts are kept.
MAX_VALUES = 100_000
# Keys decoded, at most, for the share of all keys now: every n-th key of each partition
# beyond it (decoding all 10M keys of a big store in Python took two minutes of a report).
SHARE_SAMPLE = 200_000
KEY_PREFIX = "key."
# Bytes of newest partitions kept between the two passes (beyond it they are read again).
KEPT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Contributor:
    """One (key field, value) and the new keys that carry it."""

    field: str  # "customer_id", "window.start" (the key column's leaf, without "key.")
    value: str  # JSON text of the value: null, 42, "eu-1"
    keys: int  # new keys with this value
    share: float  # keys / all new keys
    added: tuple[int, ...]  # keys added at each version of ``GrowthAttribution.steps``
    # Share of all keys at ``newest`` with this value: a value as common among all keys as
    # among the new ones (a constant field) explains nothing.
    share_of_all: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.field} = {self.value}"


@dataclass(frozen=True)
class GrowthAttribution:
    """The new keys of one view between ``base`` and ``newest``, by key field value."""

    view: StateView
    base: int
    newest: int
    new_keys: int
    steps: tuple[int, ...]  # versions base+1..newest that the chart counts
    added: tuple[int, ...]  # keys added at each step, all values
    contributors: tuple[Contributor, ...]  # top-k, most new keys first
    fields: tuple[str, ...]
    approximate: bool = False
    # Keys the "share of all keys now" was estimated from (every n-th key of each
    # partition); 0 when every key was counted.
    share_sample: int = 0

    def share_note(self) -> str:
        """How the share of all keys now was counted, when not from every key."""
        if not self.share_sample:
            return ""
        return (
            f"The share of all keys now is estimated from {self.share_sample:,} keys (an even "
            "sample of each partition)."
        )

    def _tied(self) -> list[Contributor]:
        """The contributors of the top one's field with as many new keys as it."""
        top = self.contributors[0]
        return [c for c in self.contributors if c.field == top.field and c.keys == top.keys]

    @property
    def lead(self) -> Contributor | None:
        """The value most new keys carry, when one stands out (None: none, or a tie)."""
        if not self.new_keys or not self.contributors:
            return None
        return self.contributors[0] if len(self._tied()) == 1 else None

    def sentence(self) -> str:
        """``customer_id = null accounts for 81 % of the 1,234 keys added since version 120``."""
        if not self.new_keys or not self.contributors:
            return f"No keys were added since version {self.base}."
        top = self.contributors[0]
        tied = self._tied()
        if len(tied) > 1:
            # Naming one of equal values would read as a lead where there is none.
            return (
                f"No value stands out: the {self.new_keys:,} keys added since version "
                f"{self.base} spread evenly, {len(tied)} values of {top.field} at "
                f"{top.share:.0%} each"
            )
        return (
            f"{top.label} accounts for {top.share:.0%} of the {self.new_keys:,} keys added "
            f"since version {self.base}"
        )


def value_text(cell: Any) -> str:
    """A flat cell as JSON-like text: ``null``, ``42``, ``"eu-1"`` (strings quoted)."""
    if cell is None:
        return "null"
    if isinstance(cell, bool):
        return "true" if cell else "false"
    if isinstance(cell, str):
        return json.dumps(cell, ensure_ascii=False)
    if isinstance(cell, (int, Decimal)):
        return str(cell)
    return cell_text(cell) or "null"


def window_versions(retained: Sequence[int], window: int) -> tuple[int, list[int]]:
    """(base, versions after it that the window reads), from the retained versions."""
    if not retained:
        raise AppError("no state version can be read from this store's files yet")
    newest = retained[-1]
    start = newest - max(1, window)
    if start <= 0 and retained[0] == 1:
        return 0, [v for v in retained if v >= 1]
    inside = [v for v in retained if v >= start]
    return inside[0], inside[1:]


def _added_items(before: PartitionData | None, after: PartitionData) -> np.ndarray:
    """Item numbers of ``after`` whose key bytes are not in ``before``."""
    if before is None or before.num_items == 0:
        return np.arange(after.num_items, dtype=np.int64)
    where = pc.index_in(after.keys, value_set=before.keys)
    return np.flatnonzero(~where.is_valid().to_numpy(zero_copy_only=False))


class _Keys:
    """Decodes items' keys into (field, value text) pairs: the key columns' leaves."""

    def __init__(self, source: StateSource) -> None:
        self.source = source
        self.codec = source.row_codec
        flat = Flattener(self.codec.columns)
        width = identity_width(self.codec)
        self.leaves = [n for _, names in flat.groups[:width] for n in names]
        self.count = len(self.leaves)
        self.flat = flat
        self.fields = tuple(
            n[len(KEY_PREFIX) :] if n.startswith(KEY_PREFIX) else n for n in self.leaves
        )

    def values(self, data: PartitionData, items: np.ndarray) -> Iterator[list[str]]:
        """Per item, its leaves' value texts (in :attr:`fields` order)."""
        rows = [int(i) for i in items]
        with self.source.decoding(data.partition):
            decoded = data.decode(self.codec, rows)
        for row in decoded:
            cells = self.flat.cells(data.partition, row)[1 : 1 + self.count]
            yield [value_text(c) for c in cells]


def _prune(counter: Counter[str]) -> None:
    for value, _ in counter.most_common()[MAX_VALUES // 2 :]:
        del counter[value]


# One step of a growth reading: (fraction done, None), then (1.0, the result).
Progress = tuple[float, GrowthAttribution | None]
# The top contributors as ranked: (new keys, field, value), most keys first.
Ranked = list[tuple[int, str, str]]


@dataclass
class _Chosen:
    """The top contributors' keys, counted in the second pass."""

    per_step: np.ndarray  # (contributor, step): keys added at each step's version
    added_all: np.ndarray  # per step: every key added
    at_newest: np.ndarray  # per contributor: sampled keys at the newest version
    keys_now: int  # keys sampled at the newest version


@dataclass
class _Read:
    """What the first pass keeps of one partition for the second."""

    # Per step: the items that version added (its values), rolled forward through the
    # change files; None when the partition is rebuilt at each version instead.
    added: list[PartitionData] | None
    newest: PartitionData | None  # None: not kept (over the budget, or rolled), read again
    # Rolled from its keys (every item a row): the second pass reads of the newest version
    # only the items its sample takes.
    sampled: bool = False


@dataclass
class _Ranking:
    """The first pass's result."""

    ranked: Ranked
    new_keys: int
    keys_total: int
    approximate: bool
    reads: dict[tuple[int, ...], _Read]  # by group of partitions (see _groups)


def iter_growth(
    view: StateView,
    window: int = DEFAULT_WINDOW,
    top: int = DEFAULT_TOP,
    share_sample: int = SHARE_SAMPLE,
    *,
    roll: bool = True,
    jobs: int = 1,
) -> Iterator[Progress]:
    """(fraction done, None) while partitions are read, then (1.0, the result).

    Two passes, each one partition at a time: base against newest (the new keys and their
    values, and the keys each version of the window added), then the chart, counting only
    the top contributors' values. ``roll=False`` rebuilds each partition at every version
    of the window instead of rolling forward through the change files (same figures;
    kept as the reference the rolled reading is tested against). ``jobs`` > 1 rolls the
    partitions of the first pass in that many forked worker processes.
    """
    keyed = view.keyed(open_source(view).row_codec)
    source = open_source(keyed)
    base, steps = window_versions(versions(keyed), window)
    newest = steps[-1] if steps else base
    keys = _Keys(source)
    groups = _groups(source, [base, *steps])
    total_work = 2 * len(groups) or 1
    try:
        ranking = yield from _rank_new_values(
            source, keys, (base, steps), top, total_work, roll, groups, jobs=jobs
        )
    except _OutOfOrder:
        ranking = yield from _rank_new_values(
            source, keys, (base, steps), top, total_work, roll, groups, from_keys=False
        )
    ranked, new_keys = ranking.ranked, ranking.new_keys
    stride = max(1, -(-ranking.keys_total // max(1, share_sample)))
    chosen = yield from _count_chosen(
        source, keys, (base, steps), ranking, stride, total_work, groups
    )
    contributors = tuple(
        Contributor(
            f,
            v,
            c,
            c / new_keys if new_keys else 0.0,
            tuple(int(x) for x in chosen.per_step[i]),
            int(chosen.at_newest[i]) / chosen.keys_now if chosen.keys_now else 0.0,
        )
        for i, (c, f, v) in enumerate(ranked)
    )
    yield (
        1.0,
        GrowthAttribution(
            view=keyed,
            base=base,
            newest=newest,
            new_keys=new_keys,
            steps=tuple(steps),
            added=tuple(int(x) for x in chosen.added_all),
            contributors=contributors,
            fields=keys.fields,
            approximate=ranking.approximate,
            share_sample=chosen.keys_now if stride > 1 else 0,
        ),
    )


def _groups(source: StateSource, versions: list[int]) -> list[tuple[int, ...]]:
    """What is compared version against version: each partition on its own, or, when a
    repartition (Spark 4.2+) falls inside the window and keys moved between partitions, the
    whole store as one."""
    held = {tuple(source.partitions_for(v - 1)) for v in versions if v > 0}
    if len(held) <= 1:
        return [(p,) for p in source.partitions]
    return [tuple(sorted(set().union(*held)))]


def _read(source: StateSource, version: int, group: tuple[int, ...]) -> PartitionData:
    """One partition at ``version``, or the store's partitions at it as one."""
    if len(group) == 1:
        return read_partition(source, version, group[0])
    items = [
        item
        for p in source.partitions_for(version - 1)
        if p in group
        for item in source.load_items(p, version)
    ]
    return partition_data(source, group[0], items)


def _rank_new_values(
    source: StateSource,
    keys: _Keys,
    window: tuple[int, list[int]],
    top: int,
    total_work: int,
    roll: bool,
    groups: list[tuple[int, ...]],
    *,
    from_keys: bool = True,
    jobs: int = 1,
) -> Generator[Progress, None, _Ranking]:
    """First pass, base against newest: the ``top`` (field, value)s of the new keys.

    Returns them ranked, with the new keys, the keys at newest, whether a field had too
    many values to count them all, and per partition what the second pass needs. The
    counters end here: only the top values go on.

    ``from_keys``: roll a partition from its base's key set (:func:`rolling.roll`) instead
    of reading it whole at base and newest, where every item is a row. Its new keys are then
    counted in the order the window touched them, not the newest version's order; that
    order decides which tied values a full counter drops, so a counter that must drop
    raises :class:`_OutOfOrder` (the caller ranks again, reading whole). ``jobs`` > 1
    rolls partitions in that many forked workers.
    """
    counters: list[Counter[str]] = [Counter() for _ in keys.fields]
    approximate = unordered = False
    new_keys = keys_total = kept = 0
    reads: dict[tuple[int, ...], _Read] = {}
    # A store read as one (a repartition inside the window) is not rolled from keys.
    from_keys = (
        from_keys
        and roll
        and every_item_a_row(source.row_codec)
        and all(len(g) == 1 for g in groups)
    )
    base, steps = window
    rolls = rolling.roll_each(source, [g[0] for g in groups], base, steps, jobs)
    try:
        for n, group in enumerate(groups, start=1):
            rolled = next(rolls) if from_keys else None
            if rolled is not None:
                data = partition_data(source, group[0], rolled.new)
                items = np.arange(data.num_items, dtype=np.int64)
                keys_total += rolled.num_keys
                reads[group] = _Read(rolled.added, None, sampled=True)
                unordered = True
            else:
                data, items, added = _whole_ends(source, group, window, roll)
                keys_total += data.num_items
                kept += data.nbytes
                reads[group] = _Read(added, data if kept <= KEPT_BYTES else None)
            new_keys += len(items)
            for values in keys.values(data, items):
                for counter, value in zip(counters, values, strict=True):
                    counter[value] += 1
            del data
            for counter in counters:
                if len(counter) > MAX_VALUES:
                    if unordered:
                        raise _OutOfOrder
                    _prune(counter)
                    approximate = True
            yield n / total_work, None
    finally:
        rolls.close()  # stops the workers of a ranking left early
    ranked = sorted(
        (
            (c, f, v)
            for f, counter in zip(keys.fields, counters, strict=True)
            for v, c in counter.items()
        ),
        key=lambda t: (-t[0], t[1], t[2]),
    )[:top]
    return _Ranking(ranked, new_keys, keys_total, approximate, reads)


class _OutOfOrder(Exception):
    """New keys were counted out of the newest version's order, and a counter must drop
    tied values: which ones depends on that order."""


def _whole_ends(
    source: StateSource, group: tuple[int, ...], window: tuple[int, list[int]], roll_on: bool
) -> tuple[PartitionData, np.ndarray, list[PartitionData] | None]:
    """A partition (or group) read whole at base and newest: the newest, its items whose
    keys base does not hold, and the items each step added (rolled forward through the
    change files; None when it cannot, or for a group, or ``roll_on`` false)."""
    base, steps = window
    # Rolling forward follows one partition's change files: a store read as one (a
    # repartition inside the window) is rebuilt at each version instead.
    p, single = group[0], len(group) == 1
    base_list = source.load_items(p, base) if base > 0 and single else []
    if not single:
        before = _read(source, base, group) if base > 0 else None
    else:
        before = partition_data(source, p, base_list) if base > 0 else None
    after = _read(source, steps[-1] if steps else base, group)
    items = _added_items(before, after)
    present = {k for k, _ in base_list}
    del base_list, before
    rolled = rolling.roll(source, p, base, steps, lambda: present) if roll_on and single else None
    return after, items, None if rolled is None else rolled.added


def _count_chosen(
    source: StateSource,
    keys: _Keys,
    window: tuple[int, list[int]],
    ranking: _Ranking,
    stride: int,
    total_work: int,
    groups: list[tuple[int, ...]],
) -> Generator[Progress, None, _Chosen]:
    """Second pass, version against version: keys added per step for each top value, and
    how common each is among (every ``stride``-th of) the keys at the newest version."""
    base, steps = window
    ranked = ranking.ranked
    chosen = _Chosen(
        per_step=np.zeros((len(ranked), len(steps)), dtype=np.int64),
        added_all=np.zeros(len(steps), dtype=np.int64),
        at_newest=np.zeros(len(ranked), dtype=np.int64),
        keys_now=0,
    )
    for n, group in enumerate(groups, start=len(groups) + 1):
        read = ranking.reads.pop(group)
        stride_in = stride  # of the items of ``newest``: 1 when it holds the sample only
        if read.added is None:
            newest: PartitionData | None = _count_rebuilt(
                source, keys, window, group, ranked, chosen
            )
        else:
            for s, data in enumerate(read.added):
                chosen.added_all[s] += data.num_items
                if ranked:
                    every = np.arange(data.num_items, dtype=np.int64)
                    chosen.per_step[:, s] += _matches(keys, data, every, ranked)
            newest = read.newest
            if newest is None and ranked:
                version = steps[-1] if steps else base
                if read.sampled:
                    items = source.load_items(group[0], version)[::stride]
                    newest, stride_in = partition_data(source, group[0], items), 1
                else:
                    newest = _read(source, version, group)
        if ranked and newest is not None:
            every = np.arange(0, newest.num_items, stride_in, dtype=np.int64)
            chosen.keys_now += len(every)
            chosen.at_newest += _matches(keys, newest, every, ranked)
        yield n / total_work, None
    return chosen


def _count_rebuilt(
    source: StateSource,
    keys: _Keys,
    window: tuple[int, list[int]],
    group: tuple[int, ...],
    ranked: Ranked,
    chosen: _Chosen,
) -> PartitionData | None:
    """:func:`_count_chosen` for one partition (or group, see :func:`_groups`) rebuilt at
    each version of the window (no change files to roll through); returns the newest version
    read."""
    base, steps = window
    previous = _read(source, base, group) if base > 0 else None
    for s, version in enumerate(steps):
        current = _read(source, version, group)
        items = _added_items(previous, current)
        chosen.added_all[s] += len(items)
        if ranked:
            chosen.per_step[:, s] += _matches(keys, current, items, ranked)
        previous = current
    return previous


def _matches(keys: _Keys, data: PartitionData, items: np.ndarray, ranked: Ranked) -> np.ndarray:
    """Per ranked (field, value): how many of ``items`` carry it."""
    field_at = {f: i for i, f in enumerate(keys.fields)}
    wanted = [(field_at[f], v) for _, f, v in ranked]
    counts = np.zeros(len(ranked), dtype=np.int64)
    for values in keys.values(data, items):
        for i, (at, v) in enumerate(wanted):
            if values[at] == v:
                counts[i] += 1
    return counts


def attribute_growth(
    view: StateView,
    window: int = DEFAULT_WINDOW,
    top: int = DEFAULT_TOP,
    share_sample: int = SHARE_SAMPLE,
    *,
    roll: bool = True,
    jobs: int = 1,
) -> GrowthAttribution:
    """:func:`iter_growth`'s result."""
    result = last(iter_growth(view, window, top, share_sample, roll=roll, jobs=jobs))[1]
    assert result is not None
    return result


__all__ = [
    "DEFAULT_TOP",
    "DEFAULT_WINDOW",
    "Contributor",
    "GrowthAttribution",
    "attribute_growth",
    "iter_growth",
    "value_text",
    "window_versions",
]
