"""Bad input gets exit status 2 and one line on stderr naming the file; never a traceback.

Each case copies a real sample checkpoint to a temporary directory and damages the copy.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from stateglass.app.discovery import find_checkpoints
from tests.e2e.oracle import SAMPLES


def _sample(kind: str) -> str:
    """The first sample checkpoint whose name ends with ``kind`` (e.g. agg-hdfs)."""
    for path in find_checkpoints(SAMPLES):
        if os.path.basename(path) == kind:
            return path
    pytest.skip(f"no sample checkpoint {kind}")


def _copy(kind: str, tmp_path: Path) -> Path:
    dst = tmp_path / kind
    shutil.copytree(_sample(kind), dst)
    return dst


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stateglass.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.path.dirname(SAMPLES),
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], must_name: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert must_name in lines[0], lines[0]


def _store_files(cp: Path, suffix: str) -> list[Path]:
    return sorted(
        (p for p in (cp / "state" / "0" / "0").iterdir() if p.name.endswith(suffix)),
        key=lambda p: int(p.name.split(".")[0].split("_")[0]),
    )


def _last_batch(cp: Path) -> int:
    return max(int(p.name) for p in (cp / "commits").iterdir() if p.name.isdigit())


def test_truncated_delta(tmp_path: Path) -> None:
    cp = _copy("agg-hdfs", tmp_path)
    snaps = {int(p.name.split(".")[0]) for p in _store_files(cp, ".snapshot")}
    delta = next(
        p for p in reversed(_store_files(cp, ".delta")) if int(p.name.split(".")[0]) not in snaps
    )
    data = delta.read_bytes()
    delta.write_bytes(data[: len(data) // 2])
    proc = run_cli("state", str(cp), "--batch-id", str(int(delta.name.split(".")[0]) - 1))
    assert_one_line_error(proc, str(delta))


def test_flipped_snapshot_bytes(tmp_path: Path) -> None:
    cp = _copy("agg-hdfs", tmp_path)
    snap = _store_files(cp, ".snapshot")[-1]
    data = bytearray(snap.read_bytes())
    for i in range(30, min(len(data) - 30, 60)):
        data[i] ^= 0xFF
    snap.write_bytes(bytes(data))
    proc = run_cli("state", str(cp), "--batch-id", str(int(snap.name.split(".")[0]) - 1))
    assert_one_line_error(proc, str(snap))


def test_zip_that_is_not_a_zip(tmp_path: Path) -> None:
    cp = _copy("agg-rocks", tmp_path)
    z = _store_files(cp, ".zip")[-1]
    z.write_bytes(b"this is not a zip file at all" * 10)
    proc = run_cli("state", str(cp), "--batch-id", str(int(z.name.split(".")[0].split("_")[0]) - 1))
    assert_one_line_error(proc, str(z))


def test_missing_delta_without_snapshot(tmp_path: Path) -> None:
    cp = _copy("agg-hdfs", tmp_path)
    part = cp / "state" / "0" / "0"
    snaps = sorted(int(p.name.split(".")[0]) for p in _store_files(cp, ".snapshot"))
    last = _last_batch(cp) + 1
    # Remove every snapshot at or below the last version and one delta: nothing can bridge it.
    for v in snaps:
        (part / f"{v}.snapshot").unlink()
    victim = part / f"{last - 1}.delta"
    victim.unlink()
    proc = run_cli("state", str(cp))
    assert_one_line_error(proc, f"{last - 1}.delta")


def test_zip_slip_entry(tmp_path: Path) -> None:
    cp = _copy("agg-rocks", tmp_path)
    z = _store_files(cp, ".zip")[-1]
    buf = io.BytesIO()
    with zipfile.ZipFile(z) as src, zipfile.ZipFile(buf, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
        dst.writestr("../../evil.txt", b"escaped")
    z.write_bytes(buf.getvalue())
    proc = run_cli("state", str(cp), "--batch-id", str(int(z.name.split(".")[0].split("_")[0]) - 1))
    assert_one_line_error(proc, str(z))
    assert not (tmp_path / "evil.txt").exists()


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda p: p / "nope", id="missing"),
        pytest.param(lambda p: (p / "file.txt").write_text("x") and p / "file.txt", id="file"),
        pytest.param(lambda p: (p / "empty").mkdir() or p / "empty", id="empty-dir"),
    ],
)
def test_not_a_checkpoint(tmp_path: Path, make: Callable[[Path], Path]) -> None:
    target = make(tmp_path)
    for cmd in (["info", str(target)], ["state", str(target)]):
        proc = run_cli(*cmd)
        assert_one_line_error(proc, str(target))


def test_unknown_store_names_the_known_ones(tmp_path: Path) -> None:
    proc = run_cli("state", _sample("agg-hdfs"), "--store", "nope")
    assert_one_line_error(proc, "nope")
    assert "default" in proc.stderr


def _last_zip(cp: Path) -> tuple[Path, str]:
    """The newest zip of partition 0 and the ``--batch-id`` that reads it."""
    z = _store_files(cp, ".zip")[-1]
    return z, str(int(z.name.split(".")[0].split("_")[0]) - 1)


def test_zip_with_damaged_deflate_data(tmp_path: Path) -> None:
    cp = _copy("agg-rocks", tmp_path)
    z, batch = _last_zip(cp)
    data = bytearray(z.read_bytes())
    with zipfile.ZipFile(z) as zf:
        info = max(zf.infolist(), key=lambda i: i.compress_size)
    assert info.compress_type == zipfile.ZIP_DEFLATED
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 10
    for i in range(start, start + 40):
        data[i] ^= 0x55
    z.write_bytes(bytes(data))
    proc = run_cli("state", str(cp), "--batch-id", batch)
    assert_one_line_error(proc, str(z))


@pytest.mark.parametrize("entry", ["sub/OPTIONS-000099", "./"])
def test_zip_entry_that_is_not_a_plain_name(tmp_path: Path, entry: str) -> None:
    cp = _copy("agg-rocks", tmp_path)
    z, batch = _last_zip(cp)
    buf = io.BytesIO()
    with zipfile.ZipFile(z) as src, zipfile.ZipFile(buf, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
        dst.writestr(entry, b"")
    z.write_bytes(buf.getvalue())
    proc = run_cli("state", str(cp), "--batch-id", batch, "--jobs", "1")
    assert_one_line_error(proc, str(z))


def test_failed_parallel_read_leaves_no_temporary_copies(tmp_path: Path) -> None:
    cp = _copy("agg-rocks", tmp_path)
    z, batch = _last_zip(cp)
    z.write_bytes(b"not a zip")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stateglass.app.cli",
            "state",
            str(cp),
            "--batch-id",
            batch,
            "--jobs",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.path.dirname(SAMPLES),
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert_one_line_error(proc, str(z))
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(
    ("relative", "command"),
    [
        pytest.param("metadata", "info", id="metadata"),
        pytest.param("state/0/0/loop", "state", id="in-store-dir"),
    ],
)
def test_symlink_loop(tmp_path: Path, relative: str, command: str) -> None:
    cp = _copy("agg-hdfs", tmp_path)
    link = cp / relative
    if link.exists():
        link.unlink()
    link.symlink_to(link)
    proc = run_cli(command, str(cp))
    assert_one_line_error(proc, str(link))


def test_unknown_time_zone(tmp_path: Path) -> None:
    proc = run_cli("state", _sample("agg-hdfs"), "--time-zone", "Mars/Olympus")
    assert_one_line_error(proc, "Mars/Olympus")


@pytest.mark.parametrize("command", ["state", "changes", "report"])
def test_output_inside_another_checkpoint_is_refused(tmp_path: Path, command: str) -> None:
    """A checkpoint nobody named is still one: found by its layout, even through a symlink."""
    cp, other = _copy("agg-hdfs", tmp_path), tmp_path / "other"
    shutil.copytree(_sample("dedup-hdfs"), other)
    (tmp_path / "reports").symlink_to(other / "state")
    target = tmp_path / "reports" / ("out.md" if command == "report" else "out.jsonl")
    extra = {"changes": ["--from", "0"], "report": ["--db", str(tmp_path / "sg.duckdb")]}
    proc = run_cli(command, str(cp), *extra.get(command, []), "-o", str(target))
    assert_one_line_error(proc, f"inside the checkpoint {other}")
    assert not target.exists() and not (tmp_path / "sg.duckdb").exists()


def test_a_database_inside_another_checkpoint_is_refused(tmp_path: Path) -> None:
    cp, other = _copy("agg-hdfs", tmp_path), _copy("dedup-hdfs", tmp_path)
    db = other / "state" / "sg.duckdb"
    proc = run_cli("collect", str(cp), "--db", str(db))
    assert_one_line_error(proc, f"inside the checkpoint {other}")
    assert not db.exists()


@pytest.mark.parametrize("command", ["state", "changes"])
def test_output_inside_the_checkpoint_is_refused(tmp_path: Path, command: str) -> None:
    cp = _copy("agg-hdfs", tmp_path)
    target = cp / "offsets" / "0"
    before = target.read_bytes()
    extra = ["--from", "0"] if command == "changes" else []
    proc = run_cli(command, str(cp), *extra, "-o", str(target))
    assert_one_line_error(proc, str(target))
    assert target.read_bytes() == before


def test_a_bad_storage_config_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text("[storage]\nbogus = 1\n")
    proc = run_cli("info", _sample("agg-hdfs"), "--config", str(config))
    assert_one_line_error(proc, f"{config}: unknown key 'bogus' in [storage]")
    proc = run_cli(
        "collect",
        _sample("agg-hdfs"),
        "--db",
        str(tmp_path / "sg.duckdb"),
        "--config",
        str(tmp_path),
    )
    assert_one_line_error(proc, f"{tmp_path}: is a directory, expected a TOML file")
    assert not (tmp_path / "sg.duckdb").exists()
