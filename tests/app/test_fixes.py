"""A finding's fix as text: the rewrite command with its predicate, and the catalog query.

The predicate a growth lead becomes must select, in the catalog, exactly the rows whose key
field holds that value (the value as growth attribution writes it, for every key field of a
real sample); the command must split back into the arguments ``stateglass rewrite`` takes.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from stateglass.app.browse.growth import Contributor, value_text
from stateglass.app.fixes import growth_fix, leak_fix, restart_fix, value_test
from stateglass.app.sql_examples import leak_target, table_ref
from stateglass.collectors.catalog import SqlSession
from tests.conftest import SAMPLES

AGG = str(SAMPLES / "spark-4.3" / "agg-hdfs")


def _lead(field: str, value: str) -> Contributor:
    return Contributor(field=field, value=value, keys=3, share=0.81, added=(1, 2))


@pytest.mark.parametrize(
    ("value", "test"),
    [
        ("null", "IS NULL"),
        ("42", "= 42"),
        ("-1.5", "= -1.5"),
        ("true", "= true"),
        ('"eu-1"', "= 'eu-1'"),
        ('"it\'s"', "= 'it''s'"),
        ("2024-01-01T00:40:00.000Z", "= '2024-01-01T00:40:00.000Z'"),
    ],
)
def test_a_lead_value_becomes_a_sql_test(value: str, test: str) -> None:
    assert value_test(value) == test


def test_a_value_that_is_no_literal_gives_no_fix() -> None:
    assert value_test("[1, 2]") is None
    assert growth_fix(AGG, "s.t", 0, "default", _lead("grp", "[1, 2]")) is None


def test_the_command_splits_into_rewrite_s_arguments() -> None:
    fix = growth_fix("/data/my cp", "s.t", 1, "left-keyToNumValues", _lead("user id", '"a b"'))
    assert fix is not None
    args = shlex.split(fix.command)
    assert args[:4] == ["stateglass", "rewrite", "/data/my cp", "/data/my cp-dropped"]
    assert args[4:] == ["--drop-keys", "1/left-keyToNumValues", "key.\"user id\" = 'a b'"]
    assert shlex.split(restart_fix("/data/cp", 7).command)[3:] == [
        "/data/cp-at-7",
        "--batch-id",
        "7",
    ]


def test_a_leak_fix_drops_what_its_query_lists() -> None:
    target = leak_target("window", "window.end", "default")
    assert target is not None
    fix = leak_fix(AGG, "s.t", 0, target, 1_700_000_000_000)
    predicate = shlex.split(fix.command)[-1]
    assert predicate == 'key."window"."end" <= epoch_ms(1700000000000)'
    assert fix.query is not None and f"WHERE {predicate}" in fix.query


def _leaves(prefix: str, row: dict[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, cell in row.items():
        path = f"{prefix}.{name}" if prefix else name
        out += _leaves(path, cell) if isinstance(cell, dict) else [(path, cell)]
    return out


def test_each_key_field_s_predicate_selects_its_rows() -> None:
    with SqlSession([AGG]) as session:
        schema = session.tables()[0].schema
        ref = table_ref(schema, 0, "default")
        keys = session.execute(f"SELECT key FROM {ref}").table.column("key").to_pylist()
        leaves = [_leaves("", key) for key in keys]
        checked = 0
        for i, (field, _) in enumerate(leaves[0]):
            for cell in {value_text(row[i][1]) for row in leaves}:
                fix = growth_fix(AGG, ref, 0, "default", _lead(field, cell))
                assert fix is not None, (field, cell)
                predicate = shlex.split(fix.command)[-1]
                got = session.execute(f"SELECT count(*) AS n FROM {ref} WHERE {predicate}")
                want = sum(1 for row in leaves if value_text(row[i][1]) == cell)
                assert got.table.column("n")[0].as_py() == want, (field, cell, predicate)
                checked += 1
    assert checked > 10
