"""How Diff and Key history show what they found: key first, one number format, and no
screenful of "absent" rows before a key first appears (real sample checkpoints)."""

from __future__ import annotations

from stateglass.app.browse.cells import cell_text, display_number
from stateglass.app.browse.diff import compute_diff, diff_page
from stateglass.app.browse.key_history import collapse_absent, find_keys, key_history
from stateglass.app.browse.store import PartitionCache
from stateglass.collectors.checkpoints.state_views import StateView, versions
from tests.conftest import SAMPLES

AGG = StateView(str(SAMPLES / "spark-4.3" / "agg-hdfs"))


def test_diff_changes_put_the_key_first() -> None:
    result = compute_diff(AGG, 11, 12, cache=PartitionCache(), jobs=1)
    changed = diff_page(result, "changed", 1, 1000)
    assert changed.num_rows > 0
    assert changed.column_names == ["key", "partition_id", "field", "before", "after"]
    assert all(k.startswith("{") for k in changed.column("key").to_pylist())


def test_floats_read_as_the_decimal_they_stand_for() -> None:
    total = 1000.1 + 294.0 - 0.092  # binary noise, as a streaming sum() accumulates it
    assert repr(total) == "1294.0079999999998"
    assert cell_text(total) == "1294.008" and display_number(total) == 1294.008
    assert (
        cell_text(sum([0.1] * 10)) == "1.0"
        and cell_text(0.1 + 0.2) == "0.3"
        and cell_text(1e20) == "1e+20"
    )
    assert cell_text(float("nan")) == "nan" and cell_text(7) == "7" and cell_text(None) is None


def test_key_history_collapses_the_absent_versions_before_the_key() -> None:
    cache = PartitionCache()
    found = versions(AGG)
    refs = find_keys(AGG, found[-1], "", limit=200, cache=cache, jobs=1)
    histories = [key_history(AGG, ref, found, cache=cache) for ref in refs]
    # The key that appeared last: several versions without it before it first shows.
    table = max(histories, key=lambda t: t.column("status").to_pylist().index("added"))
    statuses = table.column("status").to_pylist()
    run = statuses.index("added")
    assert run >= 2 and set(statuses[:run]) == {"absent"}
    short = collapse_absent(table)
    assert short.num_rows == table.num_rows - run + 1
    assert short.column("status")[0].as_py() == f"absent in versions {found[0]}..{found[run - 1]}"
    assert short.column("version")[0].as_py() == found[0]
    assert short.slice(1).to_pylist() == table.slice(run).to_pylist()
    # From the key's first version on, there is nothing to collapse.
    ref = refs[histories.index(table)]
    later = key_history(AGG, ref, found[run:], cache=cache)
    assert later.column("status")[0].as_py() == "present"
    assert collapse_absent(later) == later
