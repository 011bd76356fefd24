"""`make run` without moto: the other samples still show, and one line says why the DynamoDB
sample does not (`sample_checkpoints/dynamodb/demo.py dashboard`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import SAMPLES

DEMO = SAMPLES / "dynamodb" / "demo.py"


def test_without_moto_the_dashboard_runs_on_the_rest_and_one_line_says_why(
    tmp_path: Path,
) -> None:
    # An installed moto that cannot be imported, as a missing one is to the demo.
    fake = tmp_path / "site" / "moto"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("no moto here", name="moto")\n')
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    # A port already taken: the dashboard refuses it before collecting, so this stays quick,
    # and its refusal shows that it was started.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        demo = [sys.executable, str(DEMO), "dashboard", "--workdir", str(tmp_path / "work")]
        args = ["--db", str(tmp_path / "db.duckdb"), "--port", str(port), "--headless"]
        proc = subprocess.run(
            [*demo, "--", str(SAMPLES / "spark-4.3" / "agg-hdfs"), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == (
        "the DynamoDB sample is not shown: moto is not installed "
        "(.venv/bin/pip install -r requirements.txt)"
    ), proc.stderr
    assert proc.returncode == 2 and str(port) in lines[1] and len(lines) == 2, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "work").exists()
