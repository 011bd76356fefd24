"""Start the Streamlit server of ``stateglass dashboard``: loopback by default, nothing outward.

The server binds 127.0.0.1 unless ``--host`` says otherwise (with a warning: there is no
login). It is started through ``app.dashboard.launch``, which keeps Streamlit from asking an
outside host for this machine's IP. The "dashboard on http://…" line is printed only once the
server answers, so a port clash is one error line and nothing else.

Example::

    server = start_server(db_path, port=8501, host=LOOPBACK, headless=True, env=os.environ)
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping

from stateglass.app.errors import AppError
from stateglass.collectors.docs import doc_path

LOOPBACK = "127.0.0.1"
# Addresses that mean "every interface": reached locally through the loopback.
WILDCARDS = {"0.0.0.0", "::", ""}
# Streamlit's first start compiles a lot; a shared CI machine is slow.
START_TIMEOUT_S = 90.0
SCRIPT = os.path.join(os.path.dirname(__file__), "main.py")


def exposure_warning(host: str, port: int) -> str | None:
    """The one-line warning for a server reachable from other machines; None on loopback."""
    if host in ("127.0.0.1", "localhost", "::1"):
        return None
    return (
        f"warning: the dashboard listens on {host or '*'}:{port} with no login: anyone who can "
        f"reach it reads the collected state; see {doc_path('security.md')} for a proxy or "
        "single sign-on"
    )


def streamlit_command(db_path: str, port: int, host: str, headless: bool) -> list[str]:
    """The server's command line: usage statistics off, bound to ``host``."""
    return [
        sys.executable,
        "-m",
        "stateglass.app.dashboard.launch",
        "run",
        SCRIPT,
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true" if headless else "false",
        "--server.showEmailPrompt",
        "false",
        "--server.runOnSave",
        "false",
        # The dashboard's code does not change under a running server: no file watching.
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        # No "Deploy" button: this is a local tool.
        "--client.toolbarMode",
        "minimal",
        "--",
        "--db",
        db_path,
    ]


def check_port_free(host: str, port: int) -> None:
    """Raise a one-line ``AppError`` when ``host:port`` cannot be bound (in use, bad address)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise AppError(f"--host {host}: not an address of this machine ({exc})") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # Streamlit sets SO_REUSEADDR too: a port in TIME_WAIT is free for both of us.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise AppError(
                    f"port {port} on {host} is in use; pick another with --port"
                ) from exc
            raise AppError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def local_url(host: str, port: int) -> str:
    """Where this machine reaches the server (the loopback when it listens everywhere)."""
    reach = LOOPBACK if host in WILDCARDS else host
    return f"http://[{reach}]:{port}" if ":" in reach else f"http://{reach}:{port}"


def wait_until_serving(server: subprocess.Popen[bytes], url: str, timeout: float) -> None:
    """Return once ``url`` answers Streamlit's health check; ``AppError`` if the server died."""
    deadline = time.monotonic() + timeout
    while True:
        code = server.poll()
        if code is not None:
            raise AppError(f"the dashboard server stopped before serving {url} (exit {code})")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AppError(f"the dashboard server did not answer on {url} within {timeout:.0f} s")
        time.sleep(0.2)


def start_server(
    db_path: str, port: int, host: str, headless: bool, env: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    """Start the server and return it once it serves; the caller stops it."""
    check_port_free(host, port)
    warning = exposure_warning(host, port)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    # Streamlit's own banner repeats the URL (and would name other interfaces): ours suffices.
    server = subprocess.Popen(
        streamlit_command(db_path, port, host, headless),
        env=dict(env),
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_until_serving(server, local_url(host, port), START_TIMEOUT_S)
    except BaseException:
        stop_server(server)
        raise
    return server


def stop_server(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
