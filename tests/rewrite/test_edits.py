"""``stateglass rewrite --drop-keys`` on the sample checkpoints: the dry run's diff, the
refusals (one line, exit 2, nothing at DST), and what ``--apply`` writes, read back with
``stateglass state``. Spark judges the edit in ``test_edits_spark.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stateglass.app.cli import main
from tests.conftest import copy_checkpoint
from tests.rewrite.test_rewrite_safety import _nothing_at

SAMPLES = Path(__file__).parents[2] / "sample_checkpoints" / "spark-4.3"
AGG = SAMPLES / "agg-hdfs"  # 14 keys in 4 partitions at batch 11
JOIN = SAMPLES / "join-hdfs"
MANY = "value.count > 1"  # 12 of AGG's 14 keys


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def _state_lines(
    capsys: pytest.CaptureFixture[str], root: Path, store: str = "default"
) -> list[str]:
    status, out, _ = _run(capsys, "state", str(root), "--store", store, "--jobs", "1")
    assert status == 0
    return out.splitlines()


def test_the_dry_run_shows_the_keys_removed_as_state_prints_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "dst"
    status, out, _ = _run(capsys, "rewrite", str(AGG), str(dst), "--drop-keys", "0/default", MANY)
    assert status == 0 and "dry run" in out and _nothing_at(dst)
    assert "edit 0/default: 12 of 14 keys removed" in out and " saved) by --drop-keys" in out
    assert "keys removed per partition: 0: 4, 1: 1, 2: 4, 3: 3" in out
    removed = [line.strip() for line in out.splitlines() if line.startswith("    {")]
    state = _state_lines(capsys, AGG)
    assert len(removed) == 12 and set(removed) <= set(state)
    assert all(json.loads(line)["value"]["count"] > 1 for line in removed)


def test_apply_writes_the_state_without_the_dropped_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "dst"
    args = ["rewrite", str(AGG), str(dst), "--drop-keys", "op0_default", MANY, "--apply"]
    assert _run(capsys, *args)[0] == 0
    kept = {line for line in _state_lines(capsys, AGG) if json.loads(line)["value"]["count"] <= 1}
    assert len(kept) == 2 and set(_state_lines(capsys, dst)) == kept


def test_a_join_key_leaves_both_stores_of_its_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Matched by a value of ``keyWithIndexToValue``, the key leaves ``keyToNumValues``
    too, with all its values; the other side keeps it."""
    dst = tmp_path / "dst"
    edit = ["--drop-keys", "0/left-keyWithIndexToValue", "value.imp_id = 702"]
    assert _run(capsys, "rewrite", str(JOIN), str(dst), *edit, "--apply")[0] == 0

    def keys(root: Path, store: str) -> set[int]:
        return {json.loads(line)["key"]["field0"] for line in _state_lines(capsys, root, store)}

    for store in ("left-keyToNumValues", "left-keyWithIndexToValue"):
        assert 2 in keys(JOIN, store) and keys(dst, store) == keys(JOIN, store) - {2}
    for store in ("right-keyToNumValues", "right-keyWithIndexToValue"):
        assert _state_lines(capsys, dst, store) == _state_lines(capsys, JOIN, store)


@pytest.mark.parametrize(
    ("store", "predicate", "why"),
    [
        pytest.param("0/default", "value.count >", "Parser Error", id="not-sql"),
        pytest.param("0/default", "key.nope = 1", 'find key "nope"', id="unknown-column"),
        pytest.param("3/default", "true", "no store '3/default' (stores: 0/default)", id="store"),
        pytest.param("0/default", "false", "matches no key at batch 11", id="matches-nothing"),
        pytest.param("0/default", "true", "drops every key (14)", id="matches-every-key"),
    ],
)
def test_an_edit_that_cannot_mean_anything_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str, predicate: str, why: str
) -> None:
    dst = tmp_path / "dst"
    args = ["rewrite", str(AGG), str(dst), "--drop-keys", store, predicate, "--apply"]
    status, _, err = _run(capsys, *args)
    assert status == 2 and why in err and len(err.strip().splitlines()) == 1
    assert _nothing_at(dst)


def test_allow_empty_lets_an_edit_empty_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "dst"
    args = ["rewrite", str(AGG), str(dst), "--drop-keys", "0/default", "true", "--allow-empty"]
    assert _run(capsys, *args, "--apply")[0] == 0
    assert _state_lines(capsys, dst) == []


def _with_watermark(src: Path, tmp_path: Path, watermark_ms: int) -> Path:
    """A copy of ``src`` whose last batch ran at ``watermark_ms``: its state holds the keys
    of an earlier watermark, as a query that skipped its eviction would."""
    cp = copy_checkpoint(src, tmp_path / "src")
    entry = cp / "offsets" / "11"
    lines = entry.read_text().split("\n")
    lines[1] = lines[1].replace(
        '"batchWatermarkMs":1704069898000', f'"batchWatermarkMs":{watermark_ms}'
    )
    assert lines[1] != entry.read_text().split("\n")[1]
    entry.write_text("\n".join(lines))
    return cp


def test_evict_expired_drops_the_windows_spark_would_have_closed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At 00:50 the windows ending at 00:50 are closed (``window.end <= watermark``); those
    ending at 01:00 stay."""
    src = _with_watermark(AGG, tmp_path, 1704070200000)  # 2024-01-01T00:50:00Z
    dst = tmp_path / "dst"
    status, out, _ = _run(capsys, "rewrite", str(src), str(dst), "--evict-expired", "--apply")
    assert status == 0
    assert "by --evict-expired (window: window.end <= watermark, watermark 1704070200000 ms)" in out

    def end(line: str) -> str:
        return str(json.loads(line)["key"]["window"]["end"])

    before, after = _state_lines(capsys, src), _state_lines(capsys, dst)
    kept = [line for line in before if end(line) > "2024-01-01T00:50:00.000Z"]
    assert 0 < len(kept) < len(before) and sorted(after) == sorted(kept)
    assert f"{len(before) - len(kept)} of {len(before)} keys removed" in out


def test_a_raised_watermark_evicts_by_it_and_dst_goes_on_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same windows as a last batch run at 00:50 leaves, with no hand-edited offsets;
    DST's last offsets entry records the raised watermark, the rest of it as SRC's."""
    dst = tmp_path / "dst"
    edit = ["--evict-expired", "--watermark", "2024-01-01T00:50:00"]
    status, out, _ = _run(capsys, "rewrite", str(AGG), str(dst), *edit, "--apply")
    assert status == 0
    assert (
        "batchWatermarkMs 1704069898000 (2024-01-01 00:44:58.000 UTC) → 1704070200000 "
        "(2024-01-01 00:50:00.000 UTC)" in out
    )
    assert "watermark 1704070200000 ms)" in out
    expected = tmp_path / "expected"
    src = _with_watermark(AGG, tmp_path, 1704070200000)
    assert _run(capsys, "rewrite", str(src), str(expected), "--evict-expired", "--apply")[0] == 0
    assert sorted(_state_lines(capsys, dst)) == sorted(_state_lines(capsys, expected))
    meta, src_meta = (
        json.loads((root / "offsets" / "11").read_text().split("\n")[1]) for root in (dst, AGG)
    )
    assert meta == {**src_meta, "batchWatermarkMs": 1704070200000}


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--evict-expired", "--watermark", "1704069897999"], "a watermark only rises"),
        (["--evict-expired", "--watermark", "yesterday"], "not an ISO-8601 time"),
        (["--watermark", "2024-01-01T00:50:00"], "--watermark needs --evict-expired"),
    ],
)
def test_a_watermark_that_cannot_be_raised_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], why: str
) -> None:
    dst = tmp_path / "dst"
    status, _, err = _run(capsys, "rewrite", str(AGG), str(dst), *args, "--apply")
    assert status == 2 and why in err and len(err.strip().splitlines()) == 1, err
    assert _nothing_at(dst)


def test_evict_expired_with_nothing_past_the_watermark_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "dst"
    status, _, err = _run(capsys, "rewrite", str(AGG), str(dst), "--evict-expired", "--apply")
    assert status == 2 and "no key is past the watermark (" in err and ") at batch 11" in err
    assert _nothing_at(dst)
