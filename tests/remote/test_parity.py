"""Every command gives the same answer on the S3 copy of a sample checkpoint as on the local
one, apart from the path. The copy is read through moto's S3 server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from stateglass.app.escape import md
from tests.remote.conftest import REMOTE_SAMPLES, S3

# Columns that hold file times: an upload gives every object a new mtime, so these differ
# on any copy of a checkpoint, remote or local (``cp -r`` without ``-p`` does the same).
TIME_COLUMNS = {
    "first_seen",
    "last_scan",
    "last_seen",
    "seen_at",
    "purged_at",
    "modified_at",
    "offsets_written_at",
    "committed_at",
}
DERIVED_FROM_TIMES = {"batch_durations"}  # a view: commit mtime minus offsets mtime


def _stores(info: dict[str, Any]) -> list[list[str]]:
    """``--operator/--store/--state-var`` arguments for every readable store of ``info``."""
    out = []
    for s in info["stores"]:
        base = ["--operator", str(s["operator_id"]), "--store", s["store_name"]]
        if s["state_variables"]:
            for var in s["state_variables"]:
                out.append(base + var["option"].split(" ", 1)[:1] + var["option"].split()[1:])
        else:
            out.append(base)
    return out


@pytest.mark.parametrize("sample", REMOTE_SAMPLES)
def test_reading_commands_match(sample: str, s3: S3, cli: Any, tmp_path: Path) -> None:
    local, remote = s3.local(sample), s3.url(sample)

    def same(*args: str) -> str:
        a, b = cli(*args, local), cli(*args, remote, "--verbose")
        assert (a.code, b.code) == (0, 0), b.err
        assert b.out.replace(remote, local) == a.out
        assert "requests:" in b.err  # --verbose counts what the remote read cost
        return a.out

    same("info")
    info = json.loads(same("info", "--json"))
    for i, store in enumerate(_stores(info)):
        same("state", *store, "--format", "jsonl")
        if i == 0:  # every format once per checkpoint: the sinks do not care where bytes come from
            same("state", *store, "--format", "table")
            a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
            assert cli("state", local, *store, "--format", "parquet", "-o", str(a)).code == 0
            assert cli("state", remote, *store, "--format", "parquet", "-o", str(b)).code == 0
            assert pq.read_table(a).equals(pq.read_table(b))
            assert pq.read_table(a).num_rows > 0
        if i == 0 and "--read-timers" not in store:
            first = str(info["committed_batches"][0])
            same("changes", *store, "--from", first)


def _tables(db: Path, root: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows for checkpoint ``root``, paths relative to it, file times left out."""
    out = {}
    with duckdb.connect(str(db), read_only=True) as conn:
        for (table,) in conn.execute("SHOW TABLES").fetchall():
            cols = [r[0] for r in conn.execute(f"DESCRIBE {table}").fetchall()]
            if "checkpoint" not in cols or table in DERIVED_FROM_TIMES:
                continue
            keep = [c for c in cols if c not in TIME_COLUMNS]
            rows = conn.execute(
                f"SELECT {', '.join(keep)} FROM {table} WHERE checkpoint = ?", [root]
            ).fetchall()
            out[table] = sorted(
                (
                    tuple(v.replace(root, "<cp>") if isinstance(v, str) else v for v in r)
                    for r in rows
                ),
                key=repr,
            )
    return out


@pytest.mark.parametrize("sample", REMOTE_SAMPLES)
def test_collect_check_report_match(sample: str, s3: S3, cli: Any, tmp_path: Path) -> None:
    local, remote = s3.local(sample), s3.url(sample)
    db_l, db_r = tmp_path / "l.duckdb", tmp_path / "r.duckdb"
    a = cli("collect", local, "--db", str(db_l))
    b = cli("collect", remote, "--db", str(db_r))
    assert (a.code, b.code) == (0, 0), b.err
    assert b.err.replace(str(db_r), str(db_l)) == a.err
    tables_l, tables_r = _tables(db_l, local), _tables(db_r, remote)
    assert tables_l["state_versions"], "empty against empty is not a match"
    assert tables_r == tables_l

    now = "2030-01-01T00:00:00"
    a = cli("check", local, "--db", str(db_l), "--no-collect", "--json", "--now", now)
    b = cli("check", remote, "--db", str(db_r), "--no-collect", "--json", "--now", now)
    assert a.code == b.code
    assert _untimed(b.out.replace(remote, local)) == _untimed(a.out)

    md_l, md_r = tmp_path / "l.md", tmp_path / "r.md"
    assert cli("report", local, "--db", str(db_l), "--no-collect", "-o", str(md_l)).code == 0
    assert cli("report", remote, "--db", str(db_r), "--no-collect", "-o", str(md_r)).code == 0
    # Markdown reports print paths escaped, as everything from a checkpoint.
    assert md(remote) in md_r.read_text()
    assert _untimed(md_r.read_text().replace(md(remote), md(local))) == _untimed(md_l.read_text())


# Markdown escapes the colons (``15\:57\:07``).
_WALL_TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d\\?:\d\d(\\?:\d\d)?( UTC)?")
_AGE = re.compile(
    r"no commit for [\d.]+[smhd]( [\d.]+[smhd])*|\([\d.]+[a-z]+( [\d.]+[a-z]+)* ago\)"
    r"|ran [\d.]+[smhd]( [\d.]+[smhd])* ago"
)


def _untimed(text: str) -> str:
    """``text`` without wall-clock times and ages: they come from file mtimes (see above)."""
    lines = [ln for ln in text.splitlines() if "duration" not in ln]  # commit − offsets mtime
    return _AGE.sub("<age>", _WALL_TIME.sub("<time>", "\n".join(lines)))
