"""``StateSource.lookup`` (one replay of a partition's chain, keeping a few keys) against
rebuilding each version whole with ``load`` (which the e2e suite checks against Spark).

Every sample store and view, both providers, changelog and zip-only RocksDB: the keys looked
up are some present at the last version, some present only earlier (removed or replaced),
and one that never existed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_views import StateView, open_source, versions, views_of
from tests.conftest import sample_checkpoints


def _views() -> list[object]:
    out = []
    for cp in sample_checkpoints():
        for store in Checkpoint.open(cp).stores():
            for view in views_of(store, cp):
                name = f"{Path(cp).parent.name}/{Path(cp).name}/{view.label}"
                out.append(pytest.param(view, id=name))
    return out


@pytest.mark.parametrize("view", _views())
def test_lookup_equals_each_version_rebuilt(view: StateView) -> None:
    keyed = view.keyed(open_source(view).row_codec)
    source = open_source(keyed)
    found = versions(keyed)
    if not found:
        pytest.skip("no readable version")
    checked = 0
    tried = 0
    for partition in source.partitions:
        if tried == 2:
            break  # two partitions with keys are enough, and keep the case fast
        whole = {v: dict(source.load(partition, v)) for v in found}
        every = sorted({k for items in whole.values() for k in items})
        if not every:
            continue
        tried += 1
        last = whole[found[-1]]
        gone = [k for k in every if k not in last]
        keys = {*every[:3], *every[-2:], *gone[:3], b"\x00no such key\x00"}
        # All the versions, and every other one (a chain rebuilt across gaps).
        for wanted in (found, found[::2]):
            got = list(source.lookup(partition, keys, wanted))
            assert [v for v, _ in got] == sorted(wanted)
            for version, values in got:
                expected = {k: v for k, v in whole[version].items() if k in keys}
                assert values == expected, (partition, version)
                checked += 1
        # One key alone takes the single-key path.
        (one,) = every[:1]
        for version, values in source.lookup(partition, [one], found):
            assert values == ({one: whole[version][one]} if one in whole[version] else {})
    assert checked, "no partition had keys: the comparison proved nothing"
