"""``stateglass check``: the table, the exit status a deploy gates on, and one-line errors."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stateglass.app.analysis.health import RULES
from stateglass.app.cli import main
from tests.collectors.helpers import tree_digest
from tests.conftest import with_spark_file_times
from tests.health.conftest import SAMPLES, copy_checkpoint

SAMPLE = SAMPLES / "spark-4.3" / "agg-hdfs"


def _as_spark_wrote(src: Path, dst: Path) -> Path:
    return with_spark_file_times(copy_checkpoint(src, dst))


def _after_last_commit(cp: Path, delta: timedelta) -> str:
    """An ISO time ``delta`` after the checkpoint's last commit (its mtime, as collected)."""
    last = max(int(n) for n in os.listdir(cp / "commits") if n.isdigit())
    mtime = os.stat(cp / "commits" / str(last)).st_mtime
    return (datetime.fromtimestamp(mtime, tz=UTC) + delta).isoformat()


def test_healthy_is_exit_0_and_leaves_the_checkpoint_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree_digest(SAMPLE)
    now = _after_last_commit(SAMPLE, timedelta(seconds=5))
    code = main(["check", str(SAMPLE), "--db", str(tmp_path / "h.duckdb"), "--now", now])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    # The verdict leads, then a blank line and the table.
    assert lines[1].startswith("RESTART: RESTARTS - state version ")
    assert lines[3].split() == ["STATUS", "RULE", "WHERE", "FINDING"]
    # Not judged: the five rules on progress events (none here), and the stall on a sample
    # cloned from git (its file times are the clone's).
    assert sum(1 for line in lines if line.startswith("OK ")) == len(RULES) - 6
    assert sum(1 for line in lines if line.startswith("SKIP ")) == 6
    assert lines[-2] == f"rules: {len(RULES) - 6} OK, 0 WARN, 0 ERR, 6 not judged"
    assert lines[-1] == "worst: OK (exit 0)"
    assert tree_digest(SAMPLE) == before


def test_warn_is_exit_1_with_the_hint_under_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = _as_spark_wrote(SAMPLE, tmp_path / "cp")
    now = _after_last_commit(cp, timedelta(hours=3))
    code = main(["check", str(cp), "--db", str(tmp_path / "h.duckdb"), "--now", now])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    row = next(i for i, line in enumerate(lines) if line.startswith("WARN"))
    assert "stalled_query" in lines[row] and "no commit for 3.0h" in lines[row]
    assert lines[row + 1].strip().startswith("hint: ")
    assert lines[-1] == "worst: WARN (exit 1)"
    # The same history, judged with the rule switched off: OK again.
    config = tmp_path / "health.toml"
    config.write_text("[stalled_query]\nenabled = false\n")
    args = ["check", str(cp), "--db", str(tmp_path / "h.duckdb"), "--no-collect"]
    assert main([*args, "--now", now, "--config", str(config)]) == 0


def test_a_copy_with_new_file_times_is_judged_on_spark_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Copied for analysis (cp -r, aws s3 cp): every file time is the copy's. The stall is
    not judged (no query writes to a copy), the age is Spark's, and the gate stays open."""
    cp = _as_spark_wrote(SAMPLE, tmp_path / "cp")
    copy = copy_checkpoint(cp, tmp_path / "copy")
    copied_at = datetime.now(UTC)
    for f in [copy, *copy.rglob("*")]:
        os.utime(f, (copied_at.timestamp(), copied_at.timestamp()))
    now = (copied_at + timedelta(minutes=10)).isoformat()
    code = main(["check", str(copy), "--db", str(tmp_path / "h.duckdb"), "--now", now])
    out = capsys.readouterr().out
    assert code == 0, out
    stalled = next(line for line in out.splitlines() if " stalled_query " in line)
    assert stalled.startswith("SKIP ")
    assert "not judged, no query writes to a copy" in stalled
    assert "Spark's batchTimestampMs" in stalled and "file times look copied" in stalled
    last_ms = max(
        json.loads(f.read_text().split("\n")[1])["batchTimestampMs"]
        for f in (copy / "offsets").iterdir()
        if f.name.isdigit()
    )
    ran = datetime.fromtimestamp(last_ms / 1000, tz=UTC)
    assert f"({ran:%Y-%m-%d %H:%M:%S} UTC, Spark's batchTimestampMs)" in stalled
    assert "no commit for" not in out  # no age on the copy's clock
    assert out.count("file times look copied") == 1
    # The same copy, judged where its files had Spark's times: the stall is judged.
    code = main(["check", str(cp), "--db", str(tmp_path / "s.duckdb"), "--now", now])
    assert code == 1 and "no commit for" in capsys.readouterr().out


def test_without_db_nothing_is_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert main(["check", str(SAMPLE)]) == 0
    assert "(history: temporary)" in capsys.readouterr().out
    assert not (tmp_path / "home").exists()


def test_err_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cp = copy_checkpoint(SAMPLE, tmp_path / "cp")
    for name in ("12.delta", "12.snapshot"):  # the newest version of partition 3
        os.remove(cp / "state" / "0" / "3" / name)
    now = _after_last_commit(cp, timedelta(seconds=5))
    code = main(["check", str(cp), "--db", str(tmp_path / "h.duckdb"), "--now", now, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 2
    assert doc["status"] == "ERR"
    holes = [f for f in doc["findings"] if f["rule"] == "holes"]
    assert [(f["status"], f["partition_id"]) for f in holes] == [("ERR", 3)]
    assert "last committed batch 11 needs 12" in holes[0]["finding"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda d: d, "not a Structured Streaming checkpoint", id="not-a-checkpoint"),
        pytest.param(lambda d: d / "missing", "no such file or directory", id="missing"),
    ],
)
def test_not_a_checkpoint_is_one_line_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Callable[[Path], Path],
    message: str,
) -> None:
    path = make(tmp_path)
    code = main(["check", str(path), "--db", str(tmp_path / "h.duckdb")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and message in err and str(path) in err


def test_bad_config_and_uncollected_checkpoint_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "health.toml"
    config.write_text("[holes]\nthreshold = 3\n")
    db = str(tmp_path / "h.duckdb")
    assert main(["check", str(SAMPLE), "--db", db, "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(config) in err and "unknown key 'threshold'" in err
    assert not os.path.exists(db)  # the config is read before anything is collected
    main(["collect", str(SAMPLES / "spark-4.3" / "dedup-hdfs"), "--db", db])
    capsys.readouterr()
    assert main(["check", str(SAMPLE), "--db", db, "--no-collect"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not collected into" in err


def test_db_inside_the_checkpoint_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = copy_checkpoint(SAMPLE, tmp_path / "cp")
    before = tree_digest(cp)
    assert main(["check", str(cp), "--db", str(cp / "state" / "h.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "inside the checkpoint" in err
    assert tree_digest(cp) == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"not a database\n", "cannot open the database", id="not-duckdb"),
        pytest.param(None, "not a StateGlass history database", id="other-duckdb"),
    ],
)
def test_a_db_that_is_not_ours_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, message: str
) -> None:
    db = tmp_path / "h.duckdb"
    if content is None:
        import duckdb

        with duckdb.connect(str(db)) as conn:
            conn.execute("CREATE TABLE t (x INTEGER)")
    else:
        db.write_bytes(content)
    assert main(["check", str(SAMPLE), "--db", str(db), "--no-collect"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(db) in err and message in err
