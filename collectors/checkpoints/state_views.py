"""What a state table is read from: one view of one store, and the versions it can be read at.

A *view* is what Spark's reader reads in one go: a plain store, or one transformWithState
state variable (or the registered timers), or one column family of a join store (format 3).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.parsers.state_rows import LIST_STATE, MAP_STATE, TIMER_STATE, RowCodec

TIMERS_LABEL = "registered timers"
_SOURCES_KEPT = 16


@dataclass(frozen=True)
class StateView:
    """One readable table of a store, as ``stateglass state`` options name it."""

    checkpoint: str
    operator_id: int = 0
    store_name: str = "default"
    state_var: str | None = None
    read_timers: bool = False
    # Spark's flattenCollectionTypes: list state one row per element when True.
    flatten: bool = True

    @property
    def label(self) -> str:
        if self.read_timers:
            return TIMERS_LABEL
        return self.state_var or self.store_name

    def request(self, partitions: list[int] | None = None) -> StateRequest:
        return StateRequest(
            operator_id=self.operator_id,
            store_name=self.store_name,
            partitions=partitions,
            state_var=self.state_var,
            read_timers=self.read_timers,
            flatten=self.flatten,
        )

    def keyed(self, codec: RowCodec) -> StateView:
        """The view with one row per stored key: list state read unflattened.

        Diff and key history match rows by their stored key bytes, so each key must give
        one row; every other kind already does (map state: one row per user key).
        """
        if codec.spec.state_kind == LIST_STATE and self.flatten:
            return replace(self, flatten=False)
        return self


def views_of(store: StoreInfo, checkpoint: str) -> list[StateView]:
    """Every view of ``store``: one per state variable, else the store itself."""
    base = StateView(checkpoint, store.operator_id, store.store_name)
    if store.is_transform_with_state and store.state_variables:
        out = []
        for var in store.state_variables:
            if var.kind == TIMER_STATE:
                out.append(replace(base, read_timers=True))
            else:
                out.append(replace(base, state_var=var.name))
        return out
    if store.uses_column_families and len(store.column_families) > 1:
        return [replace(base, state_var=cf.name) for cf in store.column_families]
    return [base]


def identity_width(codec: RowCodec) -> int:
    """How many leading output columns name a row (the rest is its value)."""
    kind = codec.spec.state_kind
    if kind in (MAP_STATE, TIMER_STATE):
        return 2  # (key, user_map_key) / (key, expiration_timestamp_ms)
    return 1


class Sources:
    """Opened checkpoints and sources, kept for a few views (opening reads schema files).

    A source is reopened when the checkpoint's committed batches change, so a live query's
    new batches show up.
    """

    def __init__(self, kept: int = _SOURCES_KEPT) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._sources: OrderedDict[StateView, tuple[tuple[int, ...], StateSource]] = OrderedDict()

    def get(self, view: StateView) -> StateSource:
        cp = Checkpoint.open(view.checkpoint)
        stamp = tuple(cp.commit_batch_ids)
        with self._lock:
            found = self._sources.get(view)
            if found is not None and found[0] == stamp:
                self._sources.move_to_end(view)
                return found[1]
        source = StateSource(cp, view.request())
        _ = source.row_codec  # fail here, with the store's name, not later in a page
        with self._lock:
            self._sources[view] = (stamp, source)
            self._sources.move_to_end(view)
            while len(self._sources) > self.kept:
                self._sources.popitem(last=False)
        return source


SOURCES = Sources()


def open_source(view: StateView) -> StateSource:
    """The (cached) source of ``view``; raises ``CheckpointError`` with a one-line reason."""
    return SOURCES.get(view)


def versions(view: StateView) -> list[int]:
    """State versions every partition of the view can be rebuilt at (as ``stateglass info``)."""
    return open_source(view).readable_versions()
