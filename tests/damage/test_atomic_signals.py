"""Output files appear whole or not at all; SIGTERM and SIGHUP clean up like Ctrl+C."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stateglass.app.atomic import replacing
from tests.damage.hostile import (
    ROOT,
    blocked_on_fifo,
    copy_sample,
    delta_without_snapshot,
    store_files,
)


def cli(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stateglass.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        **kw,  # type: ignore[call-overload]
    )


def _fail_late(cp: Path) -> int:
    """Damage the last partition, so the earlier ones are read (and written) first."""
    parts = sorted(int(p.name) for p in (cp / "state" / "0").iterdir() if p.name.isdigit())
    delta = delta_without_snapshot(cp, part=parts[-1])
    delta.write_bytes(delta.read_bytes()[:-30])
    return int(delta.name.split(".")[0]) - 1


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "table"])
def test_a_failing_state_leaves_no_file(tmp_path: Path, fmt: str) -> None:
    cp = copy_sample("agg-hdfs", tmp_path)
    batch = _fail_late(cp)
    out = tmp_path / "out" / f"f.{fmt}"
    out.parent.mkdir()
    proc = cli(
        "state", str(cp), "--batch-id", str(batch), "--format", fmt, "-o", str(out), "--jobs", "1"
    )
    assert proc.returncode == 2, proc.stderr
    assert os.listdir(out.parent) == []  # no target, no temporary file


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_failing_state_keeps_the_existing_target(tmp_path: Path, fmt: str) -> None:
    cp = copy_sample("agg-hdfs", tmp_path)
    batch = _fail_late(cp)
    out = tmp_path / "out" / f"f.{fmt}"
    out.parent.mkdir()
    out.write_bytes(b"the previous export\n")
    proc = cli("state", str(cp), "--batch-id", str(batch), "--format", fmt, "-o", str(out))
    assert proc.returncode == 2, proc.stderr
    assert out.read_bytes() == b"the previous export\n"
    assert os.listdir(out.parent) == ["f." + fmt]


def test_a_successful_state_replaces_the_target(tmp_path: Path) -> None:
    out = tmp_path / "f.parquet"
    out.write_bytes(b"old")
    cp = copy_sample("agg-hdfs", tmp_path)
    proc = cli("state", str(cp), "--format", "parquet", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:4] == b"PAR1"
    assert sorted(os.listdir(tmp_path)) == ["agg-hdfs", "f.parquet"]


def test_replacing_discards_on_error(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(str(target)) as tmp:
        Path(tmp).write_text("half")
        raise RuntimeError("boom")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.html"]


def _wait_for(predicate: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_signal_mid_read_leaves_no_temp_dir(tmp_path: Path, sig: signal.Signals) -> None:
    """A worker blocks reading partition 1's zip (a FIFO with no writer): the run is then
    certainly mid-read, its scratch directory there, when the signal arrives."""
    cp = copy_sample("agg-rocks", tmp_path)
    zip_path = store_files(cp, ".zip", part=1)[-1]
    zip_path.unlink()
    os.mkfifo(zip_path)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    batch = int(zip_path.name.split(".")[0]) - 1
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stateglass.app.cli",
            "state",
            str(cp),
            "--batch-id",
            str(batch),
            "--jobs",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    try:
        _wait_for(lambda: any(n.startswith("stateglass-") for n in os.listdir(tmpdir)))
        _wait_for(lambda: blocked_on_fifo(proc.pid))
        assert proc.poll() is None
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # No worker is left blocked on the FIFO: opening it for writing needs a reader (and if
    # one were left, opening and closing it lets that reader go, with EOF).
    try:
        os.close(os.open(zip_path, os.O_WRONLY | os.O_NONBLOCK))
        left_behind = True
    except OSError as exc:
        assert exc.errno == errno.ENXIO
        left_behind = False
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines() == [f"stateglass: stopped by {sig.name}"]
    assert os.listdir(tmpdir) == []
    assert not left_behind
