"""Spark's set semantics for key counts: a version's change data applied to the previous key set.

Every reader's :meth:`~stateglass.collectors.stores.base.StoreReader.apply_keys` ends here, so
that the counts of all providers follow one rule. Pure: no file is read.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from stateglass.collectors.stores.base import Change


def apply_changes(keys: set[bytes], changes: Iterable[Change]) -> tuple[int, int, int]:
    """Apply delta/changelog records to ``keys`` in place; ``(added, updated, removed)``.

    Set semantics, as Spark's loaders: a put of a present key is an update, a delete of an
    absent key changes nothing, and a list-state merge adds the key if it is absent.
    """
    added = updated = removed = 0
    for change_type, key, _ in changes:
        if change_type == "delete":
            if key in keys:
                keys.discard(key)
                removed += 1
        elif key in keys:
            updated += 1
        else:
            keys.add(key)
            added += 1
    return added, updated, removed


def apply_records(
    keys: set[bytes], records: list[tuple[bytes, bytes | None]]
) -> tuple[int, int, int]:
    """:func:`apply_changes` for a whole delta file of ``(key, value or None)`` records.

    Same result, at C speed: when no key is both put and deleted in the file, the order of
    its records does not matter, so the file is applied as two set operations. Otherwise
    (rare: a key removed and re-added within one batch) it falls back to record order.
    """
    puts = [k for k, v in records if v is not None]
    if len(puts) == len(records):
        before = len(keys)
        keys.update(puts)
        added = len(keys) - before
        return added, len(puts) - added, 0
    deletes = {k for k, v in records if v is None}
    put_set = set(puts)
    if not deletes.isdisjoint(put_set):
        return apply_changes(
            keys, (("delete", k, None) if v is None else ("update", k, v) for k, v in records)
        )
    return apply_key_sets(keys, puts, deletes)


def apply_key_sets(
    keys: set[bytes], puts: list[bytes], deletes: Collection[bytes]
) -> tuple[int, int, int]:
    """Apply a delta whose removed keys are never also put in it: order does not matter."""
    removed = len(keys)
    if deletes:
        keys.difference_update(deletes)
    removed -= len(keys)
    before = len(keys)
    keys.update(puts)
    added = len(keys) - before
    return added, len(puts) - added, removed
