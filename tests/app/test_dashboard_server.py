"""``stateglass dashboard`` is safe by default: loopback only, nothing asked of outside hosts.

The real command starts the real Streamlit server. A ``sitecustomize`` on ``PYTHONPATH``
installs an audit hook in every Python process the command starts (the CLI, the server, the
watcher) and logs each name lookup and socket connection, so "no outside connection" is read
from what the processes did, not from how they were configured.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from stateglass.app.cli import main
from stateglass.app.dashboard.server import exposure_warning
from tests.conftest import ROOT

# Names and addresses that stay on this machine.
LOCAL = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "::", "None", ""}

AUDIT_HOOK = """
import os, sys

_LOG = os.environ["SG_AUDIT_LOG"]


def _hook(event, args):
    if event == "socket.getaddrinfo":
        line = f"lookup {args[0]}"
    elif event == "socket.connect" and isinstance(args[1], tuple):
        line = f"connect {args[1][0]}"
    else:
        return
    with open(_LOG, "a") as log:
        log.write(f"{os.getpid()} {line}\\n")


sys.addaudithook(_hook)
"""

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads listening sockets")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _audited_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    hook_dir = tmp_path / "audit"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(AUDIT_HOOK)
    log = tmp_path / "audit.log"
    log.touch()
    path = os.pathsep.join(p for p in (str(hook_dir), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PYTHONPATH=path, SG_AUDIT_LOG=str(log)), log


def _wait_healthy(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health") as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "the dashboard never answered"
        time.sleep(0.05)


def _cross_origin_upgrade(port: int) -> None:
    """A WebSocket handshake from a page on another origin: Streamlit checks the origin."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(
            "GET",
            "/_stcore/stream",
            headers={
                "Origin": "http://elsewhere.example",
                "Connection": "Upgrade",
                "Upgrade": "websocket",
                "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            },
        )
        conn.getresponse().read()
    finally:
        conn.close()


def _listening(pid: int) -> set[tuple[str, int]]:
    """Addresses the process and its descendants listen on (TCP)."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    found = set()
    for proc in procs:
        try:
            conns = proc.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        found |= {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    return found


def _outward(log: Path) -> list[str]:
    """Lookups and connections the audit hook saw that leave this machine."""
    return [line for line in log.read_text().splitlines() if line.split(" ", 2)[2] not in LOCAL]


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    env, log = _audited_env(tmp_path)
    port = _free_port()
    args = ["dashboard", "--db", str(tmp_path / "sg.duckdb"), "--port", str(port), "--headless"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield proc, port, log
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


def test_listens_on_loopback_only_and_asks_no_outside_host(
    dashboard: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    proc, port, log = dashboard
    _wait_healthy(proc, port)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as page:
        assert page.status == 200
    _cross_origin_upgrade(port)
    assert _listening(proc.pid) == {("127.0.0.1", port)}
    seen = log.read_text()
    assert "lookup" in seen, "the audit hook saw nothing: it did not run"
    assert _outward(log) == []


def test_the_audit_catches_streamlits_own_lookup(tmp_path: Path) -> None:
    """Control: plain ``streamlit run`` (headless, every interface) asks an outside host.

    Without this, the test above could pass because the hook saw nothing.
    """
    env, log = _audited_env(tmp_path)
    port = _free_port()
    script = tmp_path / "app.py"
    script.write_text("import streamlit as st\nst.write('hi')\n")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "streamlit", "run", str(script)),
            *("--server.port", str(port), "--server.headless", "true"),
            *("--browser.gatherUsageStats", "false"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_healthy(proc, port)
        deadline = time.monotonic() + 15
        while not _outward(log) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stderr:
            proc.stderr.close()
    outward = " ".join(_outward(log))
    assert "checkip.amazonaws.com" in outward or "8.8.8.8" in outward


def test_a_busy_port_is_one_line_before_anything_is_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["dashboard", "--db", str(tmp_path / "sg.duckdb"), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"port {port} on 127.0.0.1 is in use" in err
    assert "dashboard on" not in err


def test_another_address_is_exposed_with_one_warning_line(tmp_path: Path) -> None:
    port = _free_port()
    db = str(tmp_path / "sg.duckdb")
    args = ["dashboard", "--db", db, "--port", str(port), "--headless", "--host", "0.0.0.0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_healthy(proc, port)
        assert _listening(proc.pid) == {("0.0.0.0", port)}
    finally:
        proc.terminate()
        proc.wait(30)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [exposure_warning("0.0.0.0", port)]
    assert exposure_warning("127.0.0.1", port) is None
