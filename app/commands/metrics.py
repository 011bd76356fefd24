"""``stateglass metrics``: serve the history database to Prometheus at ``/metrics``.

Examples::

    stateglass metrics                                  # 127.0.0.1:9108, default database
    stateglass metrics --db ./sg.duckdb --port 9200
    stateglass metrics --host 0.0.0.0                   # deliberate: prints a warning

The server only reads the database (one read-only connection per scrape), so it runs beside
``stateglass watch``, which keeps the database fresh. ``docs/metrics.md`` lists the gauges.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import sys
import threading
from typing import TYPE_CHECKING, Any

from stateglass.app.args import add_db_arg
from stateglass.app.errors import AppError

if TYPE_CHECKING:
    from stateglass.app.analysis.thresholds import HealthConfig

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9108


def add_parser(subparsers: Any) -> None:
    """Register ``metrics`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "metrics",
        help="serve the database's gauges at /metrics for Prometheus",
        description="Serve /metrics in Prometheus text format, read from the history database "
        "at every scrape. Keep it fresh with `stateglass watch`.",
    )
    add_db_arg(p)
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}: this machine only)",
    )
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})"
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="TOML file with health-rule thresholds for stateglass_health_status (docs/health.md)",
    )


def is_loopback(host: str) -> bool:
    """``127.0.0.1``, ``::1``, ``localhost``: reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, port: int) -> str | None:
    """The one-line warning for a non-loopback ``--host`` (``None`` for loopback)."""
    if is_loopback(host):
        return None
    return (
        f"stateglass: warning: --host {host} serves /metrics (checkpoint paths, state sizes) "
        f"to anyone who can reach port {port}; there is no login"
    )


def serve(db: str, host: str, port: int, config: HealthConfig | None = None) -> Any:
    """Start the HTTP server in a daemon thread, judging with ``config``'s thresholds (default:
    the documented ones); returns the server (``.shutdown()`` stops it)."""
    _require_prometheus()
    from prometheus_client import CollectorRegistry, start_http_server

    from stateglass.app.metrics import HistoryCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(HistoryCollector(db, config))
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise AppError(f"{host}:{port}: cannot listen ({exc.strerror or exc})") from exc
    return server


def _require_prometheus() -> None:
    if importlib.util.find_spec("prometheus_client") is None:
        raise AppError(
            "metrics needs the prometheus_client package: pip install 'stateglass[metrics]'"
        )


def run(args: argparse.Namespace) -> int:
    """``stateglass metrics``: serve until interrupted."""
    from stateglass.app.settings import settings_of

    _require_prometheus()
    from stateglass.collectors.db.connection import existing_database

    db = existing_database(args.db)
    if not 0 < args.port < 65536:
        raise AppError(f"--port {args.port}: not a TCP port (1-65535)")
    warning = exposure_warning(args.host, args.port)
    if warning:
        print(warning, file=sys.stderr)
    server = serve(db, args.host, args.port, settings_of(args).health)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"serving http://{shown}:{args.port}/metrics from {db}", file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    finally:
        server.shutdown()
        server.server_close()
    return 0  # pragma: no cover - the wait ends only with an exception
