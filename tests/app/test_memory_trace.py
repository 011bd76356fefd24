"""The opt-in memory reports a soak reads (app/memory_trace.py): off unless asked, one line a
period with RSS, the allocators and every registered gauge."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stateglass.app import memory_trace
from tests.conftest import ROOT

CHILD = r"""
import os, sys, time
from stateglass.app.memory_trace import gauge, start_from_env
gauge("remembered_files", lambda: 42)
assert start_from_env("watch")
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    found = [f for f in os.listdir(sys.argv[1]) if f.startswith("watch-")]
    if found and open(os.path.join(sys.argv[1], found[0])).read().endswith("\n"):
        break
    time.sleep(0.05)
"""


def test_off_unless_asked_and_only_for_the_named_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(memory_trace.ENV_DIR, raising=False)
    assert not memory_trace.start_from_env("watch")
    monkeypatch.setenv(memory_trace.ENV_DIR, str(tmp_path))
    monkeypatch.setenv(memory_trace.ENV_ONLY, "streamlit,metrics")
    assert not memory_trace.start_from_env("watch")
    assert not list(tmp_path.iterdir())


def test_a_watch_reports_its_memory_and_gauges(tmp_path: Path) -> None:
    env = {**os.environ, memory_trace.ENV_DIR: str(tmp_path), memory_trace.ENV_EVERY: "1"}
    subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=env, cwd=ROOT, check=True)
    (report,) = tmp_path.glob("watch-*.txt")
    first = report.read_text().splitlines()[0]
    assert first.startswith("t=") and " rss=" in first and " malloc_used=" in first
    # Where RSS sits: the peak since the last line, anonymous against the libraries' pages,
    # and glibc's arenas (DuckDB's own allocations are anonymous but none of glibc's).
    fields = dict(f.split("=", 1) for f in first.split()[1:])
    for name in ("rss_peak", "rss_anon", "rss_file", "malloc_held", "rss_anon_other"):
        assert fields[name].endswith("MiB") and float(fields[name][:-3]) >= 0, name
    assert float(fields["rss_peak"][:-3]) >= float(fields["rss"][:-3]) - 1
    assert int(fields["arenas"]) >= 1
    assert " remembered_files=42" in first
