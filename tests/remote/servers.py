"""Storage servers on 127.0.0.1 for the remote tests: moto's S3, Azurite's Blob, and a proxy.

The proxy stands between a client and moto so a test can make the network misbehave for real:
answer ``503 SlowDown`` (throttling) or drop connections (a connection lost mid-scan).
"""

from __future__ import annotations

import http.client
import logging
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

# Azurite's documented development account (public, in Microsoft's docs; not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def upload_tree(client: Any, bucket: str, local: Path, prefix: str) -> int:
    """Every file under ``local`` to ``s3://bucket/prefix/…``, as Spark left them."""
    n = 0
    for path in sorted(local.rglob("*")):
        if path.is_file():
            key = f"{prefix}/{path.relative_to(local).as_posix()}"
            client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
            n += 1
    return n


class Gate:
    """Holds the requests whose path matches ``pattern`` until ``count`` of them wait at once,
    then lets them all through, and every later one: proof that a client sends that many at
    once. One that never does gets 504s once ``timeout_s`` has passed, and ``opened`` stays
    False."""

    def __init__(self, pattern: str, count: int, timeout_s: float = 30.0) -> None:
        self.pattern = re.compile(pattern)
        self.barrier = threading.Barrier(count)
        self.timeout_s = timeout_s
        self.opened = False

    def passes(self, path: str) -> bool:
        if self.opened or not self.pattern.search(path):
            return True
        try:
            self.barrier.wait(self.timeout_s)
        except threading.BrokenBarrierError:
            return False
        self.opened = True
        return True


class Proxy:
    """An HTTP proxy to ``target``; ``throttle`` requests get 503 SlowDown, and after
    ``cut_after`` forwarded requests every connection is dropped without an answer.

    ``delay_s`` holds every request that long before it is forwarded, as a store's round trip
    would (loopback answers in well under a millisecond; S3 in tens of them). A ``gate``
    holds some until enough of them wait at once.
    """

    def __init__(self, target: str, delay_s: float = 0.0, gate: Gate | None = None) -> None:
        self.target = target.removeprefix("http://")
        self.delay_s = delay_s
        self.gate = gate
        self.throttle = 0
        self.cut_after: int | None = None
        self.forwarded = 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    if proxy.throttle > 0:
                        proxy.throttle -= 1
                        throttled, cut = True, False
                    else:
                        throttled = False
                        cut = proxy.cut_after is not None and proxy.forwarded >= proxy.cut_after
                        proxy.forwarded += not cut
                if cut:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if proxy.delay_s:
                    time.sleep(proxy.delay_s)
                if proxy.gate is not None and not proxy.gate.passes(self.path):
                    self.send_response(504)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if throttled:
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOW_DOWN)))
                    self.end_headers()
                    self.wfile.write(SLOW_DOWN)
                    return
                conn = http.client.HTTPConnection(proxy.target, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                headers["Host"] = proxy.target
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Proxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@contextmanager
def azurite(workdir: Path) -> Iterator[str]:
    """Azurite's Blob service on a free loopback port; yields its connection string."""
    exe = shutil.which("azurite-blob")
    if exe is None:
        raise RuntimeError("azurite-blob not found: npm install -g azurite (.ci/run does)")
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            str(workdir),
            "--silent",
            "--skipApiVersionCheck",
            "--loose",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("azurite-blob did not start") from None
                time.sleep(0.2)
        yield (
            "DefaultEndpointsProtocol=http;"
            f"AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};"
        )
    finally:
        proc.terminate()
        proc.wait(10)


class ServedRequests(logging.Handler):
    """moto's request log: ``(method, path and query)`` of each request its server answered,
    taken from the werkzeug log line it writes per request."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.requests: list[tuple[str, str]] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        line = record.args[0] if isinstance(record.args, tuple) and record.args else None
        if isinstance(line, str) and line.count(" ") == 2:
            method, target, _ = line.split(" ")
            with self._guard:
                self.requests.append((method, target))


@contextmanager
def served_requests() -> Iterator[ServedRequests]:
    """Record the requests the process's moto server answers until the block ends."""
    log = logging.getLogger("werkzeug")
    handler = ServedRequests()
    level, propagate = log.level, log.propagate
    log.addHandler(handler)
    # Recorded, not printed: the level admits each request's line, propagation shows none.
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate


def sent(served: ServedRequests, bucket: str, since: int = 0) -> tuple[list[str], list[str]]:
    """The prefixes listed and the keys read, by requests after the first ``since``."""
    listed, read = [], []
    for method, target in served.requests[since:]:
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        if "list-type" in query or "prefix" in query:
            listed.append(query.get("prefix", [""])[0])
        elif method == "GET":
            read.append(unquote(parts.path).removeprefix(f"/{bucket}/"))
    return listed, read


def env_for(endpoint: str) -> dict[str, str]:
    """The environment a user would set for an S3-compatible store (MinIO, on-prem, moto)."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        # No profile or instance metadata lookups from the test machine.
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@contextmanager
def moto_environment() -> Iterator[str]:
    """moto's server (every AWS service it has) on a free loopback port, with this process's
    environment pointing the AWS chain at it (:func:`env_for`) until the block ends; yields
    the endpoint."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # not a line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = dict(os.environ)
    os.environ.update(env_for(endpoint))
    try:
        yield endpoint
    finally:
        os.environ.clear()
        os.environ.update(saved)
        server.stop()


# What a checkpoint needs for its last batch to be read (a real sample's files, the rest
# left out so that hundreds of copies upload in seconds).
_LAST_BATCH_OF_AGG_HDFS = ("metadata", "offsets/11", "commits/11", "state/0/_metadata/metadata")
_LAST_BATCH_NAMES = ("_metadata/schema", "12.snapshot", "12.delta")


def last_batch_files(sample: Path) -> dict[str, bytes]:
    """The files of ``spark-4.3/agg-hdfs`` that its last batch's state is read from, by path."""
    out = {}
    for path in sorted(sample.rglob("*")):
        rel = path.relative_to(sample).as_posix()
        if path.is_file() and (rel in _LAST_BATCH_OF_AGG_HDFS or rel.endswith(_LAST_BATCH_NAMES)):
            out[rel] = path.read_bytes()
    return out


def fill_fleet(bucket: str, files: dict[str, bytes], prefixes: list[str]) -> None:
    """``files`` under each of ``prefixes`` in this process's moto (its S3 backend, not HTTP:
    thousands of objects in a second, where PUTs take a minute); the bucket must exist."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    for prefix in prefixes:
        for rel, body in files.items():
            backend.put_object(bucket, f"{prefix}/{rel}", body)
