"""``stateglass metrics``: the real server on 127.0.0.1, scraped over HTTP and parsed with
``prometheus_client``'s own parser, against the database of every sample checkpoint."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from stateglass.app.analysis.clock import file_times
from stateglass.app.metrics import METRIC_NAMES
from stateglass.collectors.db.read import read_query, reader
from tests import progress_queries as pq
from tests.conftest import ROOT, SamplesDb
from tests.progress_fixtures import collect_run

GRAFANA = ROOT / "docs" / "grafana" / "stateglass.json"
METRICS = (sys.executable, "-m", "stateglass.app.cli", "metrics")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"


def start(db: str, *extra: str, timeout_s: float = 30.0) -> Server:
    """``stateglass metrics`` in a child process, once it answers on its port."""
    port = free_port()
    process = subprocess.Popen(
        [*METRICS, "--db", db, "--port", str(port), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = Server(process, port)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"stateglass metrics exited {process.returncode}: {err}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.1)
    stop(server)
    pytest.fail("stateglass metrics did not answer within 30 s")


def stop(server: Server) -> str:
    server.process.terminate()
    try:
        _, err = server.process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        _, err = server.process.communicate()
    return err


def scrape(server: Server) -> dict[str, list[tuple[dict[str, str], float]]]:
    """``{metric name: [(labels, value), …]}`` as Prometheus would read it."""
    with urllib.request.urlopen(server.url, timeout=30) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        out[family.name] = [(dict(s.labels), s.value) for s in family.samples]
    return out


@pytest.fixture(scope="module")
def server(all_samples_db: SamplesDb) -> Iterator[Server]:
    running = start(all_samples_db.path)
    yield running
    stop(running)


def expected_state_keys(db: str) -> dict[tuple[str, str, str], float]:
    """Keys per store at its newest version where every partition is counted, from raw rows.

    A version written after a repartition (Spark 4.2+) needs the partitions of its own batch
    (``batches.shuffle_partitions``), not every directory the store ever had."""
    rows = read_query(
        db,
        "SELECT v.checkpoint, v.operator_id, v.store_name, v.partition_id, v.version, "
        "v.num_keys, o.num_partitions FROM state_versions v LEFT JOIN operators o "
        "USING (checkpoint, operator_id, store_name)",
    )
    own = {
        (cp, batch + 1): n
        for cp, batch, n in read_query(
            db, "SELECT checkpoint, batch_id, shuffle_partitions FROM batches"
        )
        if n is not None
    }
    moved = {cp for (cp,) in read_query(db, "SELECT DISTINCT checkpoint FROM repartitions")}
    counts: dict[tuple[str, str, str], dict[int, dict[int, int]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    partitions: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    declared: dict[tuple[str, str, str], int] = {}
    for cp, op, store, part, version, keys, n in rows:
        key = (cp, str(op), store)
        partitions[key].add(part)
        declared[key] = n or 0
        if keys is not None:
            counts[key][version][part] = keys
    out = {}
    for key, by_version in counts.items():
        need = max(len(partitions[key]), declared[key])
        whole = [
            v
            for v, parts in by_version.items()
            if len(parts) >= (own[(key[0], v)] if key[0] in moved else need)
        ]
        if whole:
            out[key] = float(sum(by_version[max(whole)].values()))
    return out


def test_state_keys_match_the_database(server: Server, samples_db: str) -> None:
    served = scrape(server)
    got = {
        (s["checkpoint"], s["operator"], s["store"]): v for s, v in served["stateglass_state_keys"]
    }
    want = expected_state_keys(samples_db)
    assert len(want) >= 4, "the samples have several stores"
    assert got == want
    assert sum(want.values()) > 0


def test_checkpoint_gauges_match_the_database(server: Server, samples_db: str) -> None:
    served = scrape(server)
    lag = {s["checkpoint"]: v for s, v in served["stateglass_batch_lag"]}
    want_lag = read_query(samples_db, "SELECT checkpoint, lag_batches FROM batch_lag")
    assert lag == {cp: float(n) for cp, n in want_lag}
    ages = {s["checkpoint"]: v for s, v in served["stateglass_last_commit_age_seconds"]}
    commits = read_query(
        samples_db,
        "SELECT checkpoint, epoch(max(committed_at)), arg_max(batch_timestamp_ms, batch_id) "
        "FROM batches WHERE committed GROUP BY 1",
    )
    assert set(ages) == {cp for cp, _, _ in commits}
    with reader(samples_db) as conn:
        trusted = {cp: file_times(conn, cp).trusted for cp, _, _ in commits}
    for cp, at, ran_ms in commits:
        # A sample whose file times look copied (a git clone's) is aged on Spark's clock.
        since = at if trusted[cp] else ran_ms / 1000
        assert abs(ages[cp] - (time.time() - since)) < 60
    replay = {
        (s["checkpoint"], s["operator"], s["store"]): v
        for s, v in served["stateglass_replay_bytes_max"]
    }
    want = read_query(
        samples_db,
        "SELECT checkpoint, operator_id, store_name, max(replay_bytes) FROM snapshot_lag "
        "GROUP BY ALL",
    )
    assert replay == {(cp, str(op), st): float(b) for cp, op, st, b in want if b is not None}
    assert served["stateglass_database_up"] == [({}, 1.0)]


def test_health_status_is_each_rules_worst(server: Server, samples_db: str) -> None:
    from stateglass.app.analysis.health import RULES, evaluate

    served = scrape(server)
    got = {(s["checkpoint"], s["rule"]): v for s, v in served["stateglass_health_status"]}
    checkpoints = [r[0] for r in read_query(samples_db, "SELECT checkpoint FROM checkpoints")]
    assert {cp for cp, _ in got} == set(checkpoints)
    # Judged a moment later than the scrape: time-based rules have long thresholds.
    for cp in checkpoints:
        worst: dict[str, int] = {}
        for f in evaluate(samples_db, cp):
            value = {"SKIP": -1, "OK": 0, "WARN": 1, "ERR": 2}[f.status]
            worst[f.rule] = max(worst.get(f.rule, -1), value)
        assert {rule: got[(cp, rule)] for rule in RULES if (cp, rule) in got} == worst


def test_no_per_key_or_per_partition_labels(server: Server) -> None:
    served = scrape(server)
    labels = {name for samples in served.values() for s, _ in samples for name in s}
    # A state variable's labels are as many as the query declares, never one per key.
    bounded = {"checkpoint", "operator", "store", "rule", "state_var", "column_family", "role"}
    assert labels <= bounded


def test_listens_on_loopback_only_by_default(server: Server) -> None:
    listening = [
        c
        for c in psutil.Process(server.process.pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert listening, "the server listens"
    assert {(c.laddr.ip, c.laddr.port) for c in listening} == {("127.0.0.1", server.port)}


def test_another_host_prints_one_warning_line(samples_db: str) -> None:
    """``--host 0.0.0.0`` warns before it binds; the port is taken, so nothing is exposed."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [*METRICS, "--db", samples_db, "--host", "0.0.0.0", "--port", str(port)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    lines = done.stderr.splitlines()
    assert done.returncode == 2
    assert lines[0].startswith("stateglass: warning: --host 0.0.0.0 serves /metrics")
    assert lines[1] == f"stateglass: error: 0.0.0.0:{port}: cannot listen (Address already in use)"
    assert len(lines) == 2


def test_a_missing_database_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*METRICS, "--db", str(tmp_path / "no.duckdb")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"stateglass: error: {tmp_path / 'no.duckdb'}: no such database; run `stateglass "
        "collect` first"
    ]


def grafana_metrics() -> set[str]:
    """Every ``stateglass_*`` name the shipped Grafana dashboard queries."""
    board = json.loads(GRAFANA.read_text())
    exprs = [
        target["expr"]
        for panel in board["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    exprs += [v.get("query", {}).get("query", "") for v in board["templating"]["list"]]
    return set(re.findall(r"\bstateglass_[a-z_]+", " ".join(exprs)))


def test_grafana_uses_only_metrics_stateglass_defines() -> None:
    used = grafana_metrics()
    assert len(used) >= 10
    assert used <= set(METRIC_NAMES)


@pytest.mark.spark
def test_progress_gauges_and_every_grafana_metric_are_served(
    tmp_path: Path, late_run: pq.Ran
) -> None:
    """A real query's progress events: the newest one's rates and late rows are served, and
    so is every metric the Grafana dashboard queries."""
    db = tmp_path / "m.duckdb"
    root = collect_run(db, late_run)
    running = start(str(db))
    try:
        served = scrape(running)
    finally:
        stop(running)
    last = late_run.events[-1]
    assert served["stateglass_input_rows_per_second"] == [
        ({"checkpoint": root}, float(last["inputRowsPerSecond"]))
    ]
    assert served["stateglass_processed_rows_per_second"] == [
        ({"checkpoint": root}, float(last["processedRowsPerSecond"]))
    ]
    assert served["stateglass_progress_batch"] == [({"checkpoint": root}, float(last["batchId"]))]
    assert served["stateglass_rows_dropped_by_watermark"] == [
        (
            {"checkpoint": root, "operator": "0"},
            float(last["stateOperators"][0]["numRowsDroppedByWatermark"]),
        )
    ]
    assert served["stateglass_health_status"]
    missing = grafana_metrics() - {name for name, samples in served.items() if samples}
    assert not missing, f"the Grafana dashboard queries metrics nobody serves: {missing}"
