"""``stateglass compat`` on the corpus of real checkpoints: the same query against itself
restarts, unrelated queries are refused with Spark's class, and bad input exits 2 with one line
naming the path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stateglass.app.analysis.compat.rules import (
    FILE_SOURCE_MOVED,
    OPERATORS_MISMATCH,
    SPARK3_SCHEMA,
    VALUE_NOT_COMPATIBLE,
)
from stateglass.app.cli import main


def _checkpoints(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.glob("*/*/checkpoint") if (p / "offsets").is_dir())


def _compat(
    capsys: pytest.CaptureFixture[str], old: Path | str, new: Path | str
) -> tuple[int, dict[str, object], str]:
    status = main(["compat", str(old), str(new), "--json"])
    out, err = capsys.readouterr()
    return status, (json.loads(out) if status in (0, 1) else {}), err


def test_every_checkpoint_restarts_on_itself(
    fixture_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoints = _checkpoints(fixture_corpus)
    assert len(checkpoints) > 40
    for cp in checkpoints:
        status, report, err = _compat(capsys, cp, cp)
        assert status == 0, (cp, err, report)
        statuses = {c["status"] for c in report["checks"]}  # type: ignore[index]
        assert statuses <= {"same"}, (cp, report)
        # Operator metadata exists from Spark 4.0 on: the rules follow the writer of NEW.
        stateful = (cp / "state").is_dir()
        if stateful:
            expected = "3.x" if cp.parts[-3].startswith("3.") else "4.x"
            assert report["spark_rules"] == expected, cp


def test_unrelated_operators_are_refused_like_spark(
    fixture_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agg, dedup = (
        fixture_corpus / "4.3.0/agg-hdfs/checkpoint",
        fixture_corpus / "4.3.0/dedup-hdfs/checkpoint",
    )
    status, report, _ = _compat(capsys, agg, dedup)
    assert status == 1
    assert report["error_class"] == OPERATORS_MISMATCH
    details = report["refusals"][0]["details"]  # type: ignore[index]
    assert details == ["operator 0: stateStoreSave in OLD, dedupe in the new query"]


def test_spark3_rules_have_no_error_class(
    fixture_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # NEW written by Spark 3.5 (no operator metadata): no operator check, one exception type.
    old = fixture_corpus / "3.5.9/agg-hdfs/checkpoint"
    new = fixture_corpus / "3.5.9/dedup-hdfs/checkpoint"
    status, report, _ = _compat(capsys, old, new)
    assert status == 1
    assert report["spark_rules"] == "3.x"
    assert report["error_class"] == SPARK3_SCHEMA


def test_upgrade_from_35_explains_the_nullability_caveat(
    fixture_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 4.3 writes nullable state where 3.5 wrote `not null`; the restart keeps 3.5's setting.
    old = fixture_corpus / "3.5.9/agg-hdfs/checkpoint"
    new = fixture_corpus / "4.3.0/agg-hdfs/checkpoint"
    status, report, _ = _compat(capsys, old, new)
    checks = report["checks"]
    assert any(
        c["status"] == "caveat" and "alwaysNullableOutput" in c["message"]  # type: ignore[index]
        for c in checks  # type: ignore[union-attr]
    )
    # Two unrelated runs also read different directories: the file source refuses first.
    classes = [r["error_class"] for r in report["refusals"]]  # type: ignore[union-attr]
    assert status == 1 and classes == [FILE_SOURCE_MOVED, VALUE_NOT_COMPATIBLE]
    nullability = report["refusals"][1]["details"]  # type: ignore[index]
    assert nullability == [
        "value field 0: count bigint not null -> count bigint "
        "(now nullable: stored rows may not be null)"
    ]


@pytest.mark.parametrize("which", ["old", "new"])
def test_missing_path_is_one_line(
    which: str, fixture_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = fixture_corpus / "4.3.0/agg-hdfs/checkpoint"
    missing = tmp_path / "nowhere"
    args = (missing, good) if which == "old" else (good, missing)
    status, _, err = _compat(capsys, *args)
    assert status == 2
    assert err.strip().count("\n") == 0 and str(missing) in err and "Traceback" not in err


def test_damaged_schema_file_names_the_file(
    fixture_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = tmp_path / "cp"
    shutil.copytree(fixture_corpus / "4.3.0/agg-hdfs/checkpoint", cp)
    schema = cp / "state/0/0/_metadata/schema"
    schema.write_bytes(schema.read_bytes()[:20])
    status, _, err = _compat(capsys, cp, fixture_corpus / "4.3.0/agg-hdfs/checkpoint")
    assert status == 2
    assert err.strip().count("\n") == 0 and str(schema) in err


def test_unknown_offset_log_version_is_bad_input(
    fixture_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = tmp_path / "cp"
    shutil.copytree(fixture_corpus / "4.3.0/agg-hdfs/checkpoint", cp)
    last = max(
        (p for p in (cp / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )
    last.write_text("v99\n{}\n")
    status, _, err = _compat(capsys, fixture_corpus / "4.3.0/agg-hdfs/checkpoint", cp)
    assert status == 2
    assert str(last) in err and "v99" in err


def test_a_query_never_run_is_bad_input(
    fixture_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = tmp_path / "cp"
    (cp / "offsets").mkdir(parents=True)
    (cp / "metadata").write_text('{"id":"00000000-0000-0000-0000-000000000000"}')
    status, _, err = _compat(capsys, cp, fixture_corpus / "4.3.0/agg-hdfs/checkpoint")
    assert status == 2
    assert "offsets" in err and err.strip().count("\n") == 0
