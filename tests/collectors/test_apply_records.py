"""The bulk delta path of a chain counts exactly as the record-by-record one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stateglass.collectors.stores.keysets import apply_changes, apply_key_sets, apply_records

KEYS = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"])
RECORDS = st.lists(st.tuples(KEYS, st.one_of(st.none(), st.just(b"v"))), max_size=30)


@given(start=st.sets(KEYS), records=RECORDS)
def test_apply_records_matches_apply_changes(start: set[bytes], records: list) -> None:
    one_by_one, bulk = set(start), set(start)
    expected = apply_changes(
        one_by_one, [("delete", k, None) if v is None else ("update", k, v) for k, v in records]
    )
    assert apply_records(bulk, records) == expected
    assert bulk == one_by_one


def test_a_key_deleted_and_put_again_in_one_file() -> None:
    keys = {b"a", b"b"}
    records: list[tuple[bytes, bytes | None]] = [(b"a", None), (b"a", b"v"), (b"c", b"v")]
    assert apply_records(keys, records) == (2, 0, 1)
    assert keys == {b"a", b"b", b"c"}


@given(start=st.sets(KEYS), records=RECORDS)
def test_key_sets_path_matches_apply_changes(start: set[bytes], records: list) -> None:
    """What a scan does for a delta: keys only, when no key is both put and removed."""
    puts = [k for k, v in records if v is not None]
    deletes = [k for k, v in records if v is None]
    one_by_one, bulk = set(start), set(start)
    expected = apply_changes(
        one_by_one, [("delete", k, None) if v is None else ("update", k, v) for k, v in records]
    )
    if set(deletes).isdisjoint(puts):
        assert apply_key_sets(bulk, puts, deletes) == expected
        assert bulk == one_by_one
