"""Browse's total from the collector's key counts: the rows a whole read gives, on the samples.

A plain store (one row per stored key) lets the page stop reading once its rows are in: the
other partitions are counted by the collector already. Every such store of every sample, at
every version both know, must give the same number both ways.
"""

from __future__ import annotations

import pytest

from stateglass.app import queries
from stateglass.app.browse.table import PageRequest, one_row_per_key, read_page
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_views import StateView, open_source, versions, views_of
from tests.conftest import SamplesDb, sample_id


def _plain_views(root: str) -> list[StateView]:
    cp = Checkpoint.open(root)
    found = []
    for op in cp.operators:
        for store in op.stores:
            found += [v for v in views_of(store, cp.root) if one_row_per_key(v)]
    return found


def test_collected_keys_are_the_rows_read(all_samples_db: SamplesDb) -> None:
    compared: dict[str, int] = {}
    for path, root in all_samples_db.roots.items():
        if not path.startswith("spark-"):
            continue  # the demo and DynamoDB stores: same code, no second provider
        for view in _plain_views(root):
            source = open_source(view)
            for version in versions(view)[-3:]:  # the newest: a rolled-up history says None
                held = source.partitions_for(version - 1)
                known = queries.keys_at_version(
                    all_samples_db.path, root, view.operator_id, view.store_name, version, held
                )
                if known is None:
                    continue
                read = read_page(PageRequest(view, version, page_size=1)).total
                assert known == read, (sample_id(root), view, version)
                provider = source.store.provider
                compared[provider] = compared.get(provider, 0) + 1
    # Both providers' counts were held against a read, at many versions.
    assert compared.get("hdfs", 0) >= 10 and compared.get("rocksdb", 0) >= 10, compared


@pytest.mark.parametrize("page_size", [1, 3])
def test_a_known_total_ends_the_read_at_the_page(all_samples_db: SamplesDb, page_size: int) -> None:
    view = StateView(all_samples_db.roots["spark-4.3/agg-hdfs"])
    whole = read_page(PageRequest(view, 12, page=2, page_size=page_size))
    early = read_page(PageRequest(view, 12, page=2, page_size=page_size), total=999)
    assert early.table is not None and whole.table is not None
    assert early.table.equals(whole.table) and early.table.num_rows == page_size
    assert early.total == 999 and whole.total == 14
