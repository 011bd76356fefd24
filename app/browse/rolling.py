"""One partition rolled forward through a window of versions, from its keys at the base.

What growth attribution needs of a partition, without rebuilding it at every version of the
window, nor even whole at the newest: the items each version added, the keys at the newest
version and the items there whose keys were not at the base (the new keys). It starts from
the base's key set (values never read) and follows what each version changed:

* change files (HDFS deltas, RocksDB changelogs): the records of each version;
* RocksDB zips without changelogs, where the newer zip only adds SSTs (the batch's flush,
  nothing compacted away): the entries of the added SSTs, read straight from the files
  (their newest entry per key is the key's state; no restore);
* other RocksDB steps: the keys of the SSTs two neighbouring versions do not share, looked
  up in the newer one (an SST is immutable and uniquely named, so a key that only shared
  SSTs hold did not change); a step whose unshared SSTs hold most of the store (a
  compaction) is read whole, keys only, the older side being the key set rolled so far.

Memory: the partition's key set, the items each version added and the latest value of each
key the window touched that the base did not hold.

Example::

    rolled = roll(source, partition=3, base=10, steps=[11, 12], base_keys=lambda: keys)
    if rolled is not None:
        print(rolled.num_keys, "keys at 12,", len(rolled.new), "of them new since 10")
"""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
from collections.abc import Callable, Collection, Generator, Iterator
from dataclasses import dataclass

from stateglass.app.browse.diff import unshared_keys
from stateglass.app.browse.store import PartitionData, partition_data
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.engines.forked import ForkedPool
from stateglass.collectors.engines.signals import restore_default_signals
from stateglass.collectors.watch.events import is_remote

Item = tuple[bytes, bytes]
# The value at a step of keys that may have changed (None: absent there).
Touched = dict[bytes, "bytes | None"]


@dataclass
class _Step:
    """What one step of the window changed: ``touched``, or, for a step read whole, every
    key at it and a way to look some of them up there."""

    touched: Touched | None = None
    keys: set[bytes] | None = None
    values: Callable[[Collection[bytes]], dict[bytes, bytes]] | None = None


class _Merges(Exception):
    """List-state merges in a change file: their values need the whole store."""


@dataclass
class Rolled:
    """A partition rolled from ``base`` through the steps of a window."""

    added: list[PartitionData]  # per step: the items that version added
    num_keys: int  # stored keys at the newest version
    new: list[Item]  # the items at the newest version whose keys the base did not hold


def roll(
    source: StateSource,
    partition: int,
    base: int,
    steps: list[int],
    base_keys: Callable[[], set[bytes]],
) -> Rolled | None:
    """``partition`` rolled through ``steps`` from its keys at ``base`` (``base_keys()``,
    asked only once rolling is known to work). None when a version of the window has no
    change file and the versions share no files (nothing gained over rebuilding each), or
    when list-state merges appear.

    A key counts as added at a step when it is present after the step and was not before
    it, whatever happened in between (removed and put again: not added).
    """
    reader = source.reader(partition)
    newest = steps[-1] if steps else base
    walk: Iterator[_Step]
    if set(range(base + 1, newest + 1)) <= reader.change_versions():
        walk = _through_changes(source, partition, base, steps)
    else:
        chain = [base, *steps]
        plans = [
            _plan_step(source, partition, previous, step)
            for previous, step in zip(chain, steps, strict=False)
        ]
        if all(plan is None for plan in plans):
            return None
        walk = _through_unshared(source, partition, steps, plans)
    try:
        return _fold(source, partition, base_keys(), walk)
    except _Merges:
        return None


# Set in the parent just before the fork; read by the workers: (source, base, steps).
_JOB: tuple[StateSource, int, list[int]] | None = None


def roll_each(
    source: StateSource, partitions: list[int], base: int, steps: list[int], jobs: int = 1
) -> Generator[Rolled | None, None, None]:
    """:func:`roll` of each partition from its base's key set, in order; ``jobs`` > 1
    rolls them in that many forked workers (partitions are independent, and what comes
    back is small: the items each step added and the new keys)."""
    if (
        jobs <= 1
        or len(partitions) <= 1
        or "fork" not in multiprocessing.get_all_start_methods()
        # fsspec's object-store clients (s3fs, adlfs, gcsfs) run an event loop that a forked
        # child cannot use: remote stores are rolled in this process.
        or is_remote(source.cp.root)
    ):
        for p in partitions:
            yield roll(source, p, base, steps, lambda p=p: source.load_keys(p, base))  # type: ignore[misc]
        return
    global _JOB
    # A worker stopped by SIGTERM skips its cleanup: its RocksDB restores go under one
    # directory that the parent removes.
    scratch = tempfile.mkdtemp(prefix="stateglass-growth-")
    _JOB = (source, base, steps)
    saved, tempfile.tempdir = tempfile.tempdir, scratch
    try:
        with ForkedPool(source.cp.root, jobs, initializer=restore_default_signals) as pool:
            yield from pool.results(_roll_one, partitions)
    finally:
        _JOB = None
        tempfile.tempdir = saved
        shutil.rmtree(scratch, ignore_errors=True)


def _roll_one(partition: int) -> Rolled | None:
    assert _JOB is not None
    source, base, steps = _JOB
    return roll(source, partition, base, steps, lambda: source.load_keys(partition, base))


def _fold(
    source: StateSource, partition: int, base_keys: set[bytes], walk: Iterator[_Step]
) -> Rolled:
    """Apply each step to the key set; keep what each added and the new keys' values."""
    present = set(base_keys)
    latest: Touched = {}  # keys the base did not hold: their value now (None: absent)
    added: list[PartitionData] = []
    for step in walk:
        if step.touched is None:
            assert step.keys is not None and step.values is not None
            # Set operations at C speed; only the keys that matter are looked up. A key
            # the base did not hold is here either fresh or already new before.
            fresh = step.keys - present
            now_new = {k for k in fresh if k not in base_keys}
            now_new.update(k for k, v in latest.items() if v is not None and k in step.keys)
            found = step.values(fresh | now_new)
            present = step.keys
            latest = {k: found.get(k) for k in now_new}
            added.append(
                partition_data(source, partition, [(k, found[k]) for k in fresh if k in found])
            )
            continue
        touched = step.touched
        fresh_items = [(k, v) for k, v in touched.items() if v is not None and k not in present]
        for k, v in touched.items():
            if v is None:
                present.discard(k)
            else:
                present.add(k)
            if k not in base_keys:
                latest[k] = v
        added.append(partition_data(source, partition, fresh_items))
    new = [(k, v) for k, v in latest.items() if v is not None]
    return Rolled(added, len(present), new)


def _through_changes(
    source: StateSource, partition: int, base: int, steps: list[int]
) -> Iterator[_Step]:
    """Per step, the keys the change files since the step before name, with their values."""
    previous = base
    for step in steps:
        touched: Touched = {}
        for version in range(previous + 1, step + 1):
            for kind, key, value in source.changes(partition, version):
                if kind == "append":
                    raise _Merges
                touched[key] = value if kind == "update" else None
        yield _Step(touched)
        previous = step


# How one step between full versions is read: what its flushed SSTs say (a dict), the
# keys of the SSTs it does not share to look up in it (a list), or whole (None).
_Plan = Touched | list[bytes] | None


def _plan_step(source: StateSource, partition: int, previous: int, step: int) -> _Plan:
    if previous == 0:
        return None
    flushed = source.flushed_changes(partition, previous, step)
    return flushed if flushed is not None else unshared_keys(source, partition, previous, step)


def _through_unshared(
    source: StateSource, partition: int, steps: list[int], plans: list[_Plan]
) -> Iterator[_Step]:
    """Per step: the entries of the SSTs a flush added (no restore); else the keys of the
    SSTs it does not share with the step before, looked up in it (one restore); a step
    whose files name too many keys, whole (its keys, then the few values wanted)."""
    for step, plan in zip(steps, plans, strict=True):
        if isinstance(plan, dict):
            yield _Step(plan)
        elif plan is None:
            values = _lookup(source, partition, step)
            yield _Step(keys=source.load_keys(partition, step), values=values)
        else:
            found = _lookup(source, partition, step)(plan)
            yield _Step({k: found.get(k) for k in plan})


def _lookup(
    source: StateSource, partition: int, version: int
) -> Callable[[Collection[bytes]], dict[bytes, bytes]]:
    def values(keys: Collection[bytes]) -> dict[bytes, bytes]:
        return dict(source.lookup(partition, keys, [version]))[version] if keys else {}

    return values


__all__ = ["Rolled", "roll", "roll_each"]
