"""`stateglass sql`: the catalog listed for scripts, queries whose rows print as `stateglass
state` prints them, the one way to pick a batch, and hostile queries refused in one line with
nothing written.

Each case runs the real command in a fresh process (as a script would), from an empty
folder, so that a statement that wrote a file would leave it there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, copy_checkpoint

ROOT = SAMPLES / "spark-4.3"
JOIN = ROOT / "join-hdfs"
SESSIONS = ROOT / "session-rocks-cl"
TWS = ROOT / "tws-rocks-cl"
LISTING = {"schema", "table", "checkpoint", "operator_id", "store_name", "state_var", "kind"}
KINDS = {"state", "changes", "timers", "metadata", "history"}


def sg(*argv: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(cwd)}  # no ~/.stateglass history of the machine's
    return subprocess.run(
        [sys.executable, "-m", "stateglass.app.cli", *argv],
        cwd=cwd,
        env=env,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("stateglass: error: ")
    assert "Traceback" not in proc.stderr
    return proc.stderr


@pytest.fixture(scope="module")
def listing(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    cwd = tmp_path_factory.mktemp("listing")
    out = _ok(sg("sql", str(ROOT), "--tables", "--format", "jsonl", cwd=cwd))
    return [json.loads(line) for line in out.splitlines()]


def _table(listing: list[dict[str, object]], checkpoint: Path, **fields: object) -> str:
    (found,) = [
        e
        for e in listing
        if e["checkpoint"] == str(checkpoint) and all(e[k] == v for k, v in fields.items())
    ]
    return f"{found['schema']}.{found['table']}"


def test_tables_lists_one_object_per_table(listing: list[dict[str, object]]) -> None:
    assert listing and all(set(e) == LISTING for e in listing)
    assert {e["kind"] for e in listing} <= KINDS
    assert {"state", "changes", "timers", "metadata"} <= {e["kind"] for e in listing}
    # the path as given, and the TWS variables as tables of their own
    assert str(JOIN) in {e["checkpoint"] for e in listing}
    tws = {e["state_var"] for e in listing if e["checkpoint"] == str(TWS) and e["kind"] == "state"}
    assert {"stats", "by_kind", "recent"} <= tws
    plain = [e for e in listing if e["kind"] == "state" and e["checkpoint"] == str(JOIN)]
    assert plain and all(e["state_var"] is None for e in plain)


def test_a_relative_root_lists_its_checkpoints_relative() -> None:
    listed = _ok(sg("sql", "spark-4.3", "--tables", "--format", "jsonl", cwd=SAMPLES))
    paths = {json.loads(line)["checkpoint"] for line in listed.splitlines()}
    assert "spark-4.3/agg-hdfs" in paths
    assert all(p.startswith("spark-4.3/") for p in paths), paths


@pytest.mark.parametrize(
    ("checkpoint", "fields", "pick"),
    [
        pytest.param(
            JOIN,
            {"operator_id": 0, "store_name": "left-keyWithIndexToValue"},
            ["--store", "left-keyWithIndexToValue"],
            id="join",
        ),
        pytest.param(SESSIONS, {"operator_id": 0, "store_name": "default"}, [], id="rocks"),
        pytest.param(TWS, {"state_var": "by_kind"}, ["--state-var", "by_kind"], id="tws-map"),
        # An aggregate's buffer repeats field names ("sum" twice): Spark prints them so.
        pytest.param(ROOT / "agg-hdfs", {"operator_id": 0}, [], id="repeated-names"),
    ],
)
def test_jsonl_rows_are_state_rows(
    listing: list[dict[str, object]],
    checkpoint: Path,
    fields: dict[str, object],
    pick: list[str],
    tmp_path: Path,
) -> None:
    table = _table(listing, checkpoint, kind="state", **fields)
    state = _ok(sg("state", str(checkpoint), *pick, cwd=tmp_path))
    columns = list(json.loads(state.splitlines()[0]))
    select = ", ".join(columns)  # Spark's columns, without the catalog's batch_id
    got = _ok(
        sg(
            "sql",
            str(ROOT),
            "--format",
            "jsonl",
            "-e",
            f"SELECT {select} FROM {table}",
            cwd=tmp_path,
        )
    )
    assert sorted(got.splitlines()) == sorted(state.splitlines())


def test_batch_id_picks_an_earlier_batch(listing: list[dict[str, object]], tmp_path: Path) -> None:
    table = _table(listing, SESSIONS, kind="state", store_name="default")
    columns = list(json.loads(_ok(sg("state", str(SESSIONS), cwd=tmp_path)).splitlines()[0]))
    for batch in (1, 2):
        state = _ok(sg("state", str(SESSIONS), "--batch-id", str(batch), cwd=tmp_path))
        query = f"SELECT {', '.join(columns)} FROM {table} WHERE batch_id = {batch}"
        got = _ok(sg("sql", str(ROOT), "--format", "jsonl", "-e", query, cwd=tmp_path))
        assert sorted(got.splitlines()) == sorted(state.splitlines()), batch


@pytest.mark.parametrize(
    ("where", "noted"),
    [
        pytest.param("WHERE batch_id = 1.0", True, id="a decimal picks no batch"),
        pytest.param("WHERE batch_id = (SELECT 1)", True, id="a subquery picks no batch"),
        pytest.param("WHERE batch_id = 1", False, id="an integer picks it"),
        pytest.param(
            "WHERE partition_id IN (SELECT partition_id FROM {table} WHERE batch_id = 1)",
            False,
            id="the last batch beside a picked one",
        ),
        pytest.param("", False, id="no batch asked for"),
    ],
)
def test_a_batch_id_comparison_that_picks_no_batch_is_noted(
    listing: list[dict[str, object]], tmp_path: Path, where: str, noted: bool
) -> None:
    table = _table(listing, SESSIONS, kind="state", store_name="default")
    query = f"SELECT count(*) AS n FROM {table} {where.format(table=table)}"
    proc = sg("sql", str(ROOT), "--format", "csv", "-e", query, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    if noted:
        assert proc.stdout.splitlines() == ["n", "0"]  # the last batch's rows, none kept
        (note,) = proc.stderr.splitlines()
        assert note.startswith(f"stateglass: note: no batch was picked for {table} (batch ")
    else:
        assert int(proc.stdout.splitlines()[1]) > 0 and proc.stderr == ""


def test_sql_from_a_file_and_from_stdin(listing: list[dict[str, object]], tmp_path: Path) -> None:
    table = _table(listing, JOIN, kind="state", store_name="left-keyWithIndexToValue")
    query = f"SELECT count(*) AS n FROM {table};"
    (tmp_path / "q.sql").write_text(query)
    from_file = _ok(sg("sql", str(ROOT), "-f", "q.sql", "--format", "csv", cwd=tmp_path))
    from_stdin = _ok(sg("sql", str(ROOT), "--format", "csv", cwd=tmp_path, stdin=query))
    assert from_file == from_stdin and from_file.splitlines()[0] == "n"
    assert int(from_file.splitlines()[1]) > 0


def test_outputs_to_files(listing: list[dict[str, object]], tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    table = _table(listing, SESSIONS, kind="state", store_name="default")
    query = f"SELECT * FROM {table}"
    _ok(sg("sql", str(ROOT), "-e", query, "--format", "parquet", "-o", "s.parquet", cwd=tmp_path))
    _ok(sg("sql", str(ROOT), "-e", query, "--format", "jsonl", "-o", "s.jsonl", cwd=tmp_path))
    assert pq.read_table(tmp_path / "s.parquet").num_rows == len(
        (tmp_path / "s.jsonl").read_text().splitlines()
    )
    shown = _ok(sg("sql", str(ROOT), "-e", query, cwd=tmp_path))
    assert "partition_id" in shown.splitlines()[0] and "rows)" in shown


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """`stateglass sql … | head`: the command ends at once and well (status 0, nothing on
    stderr), its session's temporary folder removed though the process skips its teardown."""
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    query = "SELECT range AS n FROM range(3000000)"
    argv = ["sql", str(SESSIONS), "--format", "csv", "-e", query]
    with subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", *argv],
        cwd=tmp_path,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()
        stderr = proc.stderr.read()
        status = proc.wait(timeout=300)
    assert first.split() == [b"n"]
    assert (status, stderr) == (0, b"")
    assert [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["-e", "SELECT * FROM no_such.table_here"], id="unknown table"),
        pytest.param(["-e", "SELEC 1"], id="syntax"),
        pytest.param(["-e", "SELECT 1", "--format", "parquet"], id="parquet without -o"),
        pytest.param(["-e", "SELECT 1", "--memory-limit", "lots"], id="bad size"),
        pytest.param(["-e", "   "], id="no SQL"),
        pytest.param(["-e", "SELECT 1", "--time-limit", "inf"], id="endless time limit"),
        pytest.param(["-e", "SELECT 1", "--time-limit", "1e30"], id="huge time limit"),
        pytest.param(["-e", "SELECT 1", "--max-rows", "-1"], id="negative max rows"),
        pytest.param(
            ["-e", "SELECT CASE WHEN i > 5000 THEN error('boom') END FROM range(10000) t(i)"],
            id="an error after the first rows",
        ),
    ],
)
def test_mistakes_are_one_line(argv: list[str], tmp_path: Path) -> None:
    _one_line_error(sg("sql", str(ROOT), *argv, cwd=tmp_path))


def test_a_misspelt_table_gets_duckdbs_hint(
    listing: list[dict[str, object]], tmp_path: Path
) -> None:
    table = _table(listing, SESSIONS, kind="state", store_name="default")
    proc = sg("sql", str(ROOT), "-e", f"SELECT * FROM {table}x", cwd=tmp_path)
    assert f'Did you mean "{table.split(".")[1]}' in _one_line_error(proc)


def test_a_value_duckdb_cannot_convert_is_named(
    listing: list[dict[str, object]], tmp_path: Path
) -> None:
    # DuckDB closes the state table's scan when the cast fails: its error is the one said.
    table = _table(listing, SESSIONS, kind="state", store_name="default")
    query = f'SELECT CAST(key."user" AS INTEGER) FROM {table}'
    said = _one_line_error(sg("sql", str(ROOT), "-e", query, cwd=tmp_path))
    assert "Conversion Error" in said and "GeneratorExit" not in said


def test_an_uncommitted_batch_says_what_state_says(
    listing: list[dict[str, object]], tmp_path: Path
) -> None:
    table = _table(listing, SESSIONS, kind="state", store_name="default")
    state = sg("state", str(SESSIONS), "--batch-id", "999", cwd=tmp_path)
    sql = sg("sql", str(ROOT), "-e", f"SELECT * FROM {table} WHERE batch_id = 999", cwd=tmp_path)
    assert _one_line_error(sql) == _one_line_error(state)


def test_a_purged_batch_says_what_state_says(tmp_path: Path) -> None:
    cp = copy_checkpoint(ROOT / "agg-hdfs", tmp_path / "agg-hdfs")
    for delta in cp.glob("state/0/*/[12].delta"):
        delta.unlink()
    state = sg("state", str(cp), "--batch-id", "0", cwd=tmp_path)
    query = "SELECT * FROM agg_hdfs.op0_default WHERE batch_id = 0"
    said = _one_line_error(sg("sql", str(cp), "-e", query, cwd=tmp_path))
    assert "purged" in said and said == _one_line_error(state)


HOSTILE = [
    pytest.param("SELECT * FROM read_csv('/etc/passwd')", id="read_csv"),
    pytest.param("COPY (SELECT 1) TO 'x.csv'", id="copy-to"),
    pytest.param("ATTACH 'x.duckdb' AS x", id="attach"),
    pytest.param("INSTALL httpfs", id="install"),
    pytest.param("LOAD httpfs", id="load"),
    pytest.param("SET memory_limit='100GB'", id="set-memory"),
    pytest.param("SET enable_external_access=true", id="set-external-access"),
    pytest.param(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
        id="endless-recursion",
    ),
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_are_refused_in_one_line_and_write_nothing(
    query: str, tmp_path: Path
) -> None:
    proc = sg("sql", str(ROOT), "-e", query, "--time-limit", "3", cwd=tmp_path)
    _one_line_error(proc)
    assert "root:" not in proc.stdout + proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("select", "output"),
    [
        pytest.param("count(*)", [], id="counted"),
        # Rows stream out before the limit: DuckDB's interrupt then comes through Arrow.
        pytest.param("a.key, h.range", ["--format", "jsonl"], id="rows-to-stdout"),
        pytest.param("a.key, h.range", ["--format", "csv", "-o", "out.csv"], id="rows-to-file"),
    ],
)
def test_a_cross_join_of_two_stores_stops_at_the_limit(
    listing: list[dict[str, object]], tmp_path: Path, select: str, output: list[str]
) -> None:
    table = _table(listing, SESSIONS, kind="state", store_name="default")
    joined = f"{table} a, {table} b, {table} c, {table} d, {table} e, {table} f, {table} g"
    # Rows come at once from a store and a range; seven stores first would come as none.
    sources = joined if select == "count(*)" else table + " a"
    query = f"SELECT {select} FROM {sources}, range(1000000000) h"
    proc = sg("sql", str(ROOT), "-e", query, "--time-limit", "2", *output, cwd=tmp_path)
    assert "time limit" in _one_line_error(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_history_is_attached_read_only(tmp_path: Path) -> None:
    db = tmp_path / "sg.duckdb"
    _ok(sg("collect", str(SESSIONS), "--db", str(db), cwd=tmp_path))
    count = "SELECT count(*) AS n FROM history.state_versions"
    got = _ok(
        sg("sql", str(SESSIONS), "--db", str(db), "--format", "csv", "-e", count, cwd=tmp_path)
    )
    assert int(got.splitlines()[1]) > 0
    before = db.stat().st_mtime_ns
    write = "CREATE TABLE history.mine AS SELECT 1 AS x"
    _one_line_error(sg("sql", str(SESSIONS), "--db", str(db), "-e", write, cwd=tmp_path))
    assert db.stat().st_mtime_ns == before
    missing = sg(
        "sql", str(SESSIONS), "--db", str(tmp_path / "none.duckdb"), "-e", count, cwd=tmp_path
    )
    assert "none.duckdb" in _one_line_error(missing)
