"""The wheel as a user installs it: built, installed into a fresh virtualenv, and run.

The builds and the virtualenv are made beside the suite while earlier tests run
(tests/installed/wheel_env.py); the tests here check what they made and run it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.test_readme_sql import notebook_example
from tests.conftest import SAMPLES
from tests.installed.wheel_env import PREBUILT, Built, Venv
from tests.remote.servers import env_for, free_port, upload_tree

SAMPLE = SAMPLES / "spark-4.3" / "agg-hdfs"
ROCKS = SAMPLES / "spark-4.3" / "agg-rocks-cl"
# A guard against a hung server, not a wait: the loop below returns as soon as it answers.
DASHBOARD_DEADLINE_S = 120.0

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built() -> Built:
    return PREBUILT.result()


@pytest.fixture(scope="module")
def dist(built: Built) -> Path:
    return built.dist


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (found,) = dist.glob("stateglass-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(built: Built) -> Venv:
    return built.venv


def _site_packages(venv: Venv) -> Path:
    out = subprocess.run(
        [venv.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        cwd=venv.home,
        env=venv.env(),
    )
    return Path(out.stdout.strip())


def test_the_wheel_carries_the_speedups_listener_grafana_and_docs(wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    assert "stateglass/app/listener/stateglass_listener.py" in names
    assert "stateglass/docs/grafana/stateglass.json" in names
    assert {"stateglass/docs/spark-engine.md", "stateglass/docs/health.md"} <= names
    # The conformance suites plugin authors run from their own tests (docs/providers.md).
    assert {
        "stateglass/collectors/stores/conformance.py",
        "stateglass/app/provider_conformance.py",
    } <= names
    assert any(n.startswith("stateglass/parsers/_speedups.") for n in names)
    assert "stateglass/__init__.py" in names  # the notebook API's names (stateglass.connect)
    assert "stateglass/py.typed" in names  # its types, for the users' type checkers
    assert not any(n.split("/", 1)[0] in ("app", "collectors", "parsers", "tests") for n in names)


def test_a_wheel_built_without_a_compiler_runs_on_pure_python(built: Built, tmp_path: Path) -> None:
    import zipfile

    # Built from the sdist with CC=false (wheel_env.build_all): the speedups are optional, so
    # the build succeeded.
    (built_wheel,) = built.pure.glob("stateglass-*.whl")
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(built_wheel).extractall(unpacked)
    assert not list((unpacked / "stateglass" / "parsers").glob("_speedups*.so"))
    # -S: this .venv's packages arrive as a plain path entry whose .pth files (the editable
    # install's finder among them) do not run, so StateGlass comes from the unpacked wheel.
    site = sysconfig.get_paths()["purelib"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(unpacked), site])}
    probe = "import stateglass.parsers.hdfs_files as r; print(r.__file__, r._speedups)"
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert out.stdout.split() == [str(unpacked / "stateglass/parsers/hdfs_files.py"), "None"]
    cmd = [sys.executable, "-S", "-m", "stateglass.app.cli", "state", str(ROCKS)]
    pure_rows = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True)
    compiled = subprocess.run(
        [sys.executable, "-m", "stateglass.app.cli", "state", str(ROCKS)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert pure_rows.returncode == 0, pure_rows.stderr
    assert pure_rows.stdout == compiled.stdout and compiled.stdout.count("\n") > 5


def test_the_namespace_is_the_only_top_level_name(venv: Venv) -> None:
    site = _site_packages(venv)
    for taken in ("app", "collectors", "parsers"):
        assert not (site / taken).exists(), taken
    proc = subprocess.run(
        [venv.python, "-c", "import app"], cwd=venv.home, env=venv.env(), capture_output=True
    )
    assert proc.returncode != 0 and b"No module named 'app'" in proc.stderr


def test_pip_show_lists_the_runtime_dependencies_and_no_dev_tools(venv: Venv) -> None:
    out = subprocess.run(
        [venv.python, "-m", "pip", "show", "stateglass"],
        cwd=venv.home,
        env=venv.env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    requires = next(line for line in out.splitlines() if line.startswith("Requires:"))
    for needed in ("duckdb", "lz4", "streamlit", "plotly", "rocksdict", "zstandard"):
        assert needed in requires, requires
    installed = subprocess.run(
        [venv.python, "-m", "pip", "list", "--format", "json"],
        cwd=venv.home,
        env=venv.env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {p["name"].lower() for p in json.loads(installed)}
    assert not names & {"pyspark", "moto", "playwright", "pytest", "hypothesis", "mypy", "ruff"}


def test_version_comes_from_the_package_metadata(venv: Venv) -> None:
    proc = venv.run("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "stateglass 0.1.0"


def test_info_state_check_and_compat_on_a_sample(venv: Venv, tmp_path: Path) -> None:
    info = venv.run("info", str(SAMPLE))
    assert info.returncode == 0, info.stderr
    assert "Traceback" not in info.stderr
    state = venv.run("state", str(ROCKS))
    assert state.returncode == 0, state.stderr
    assert len(state.stdout.splitlines()) > 0 and json.loads(state.stdout.splitlines()[0])
    check = venv.run("check", str(SAMPLE), "--db", str(tmp_path / "sg.duckdb"))
    assert check.returncode in (0, 1), check.stderr  # OK or WARN: a finished sample run
    assert "Traceback" not in check.stderr
    compat = venv.run("compat", str(SAMPLE), str(SAMPLE))
    assert compat.returncode == 0, compat.stdout + compat.stderr


def test_a_missing_extra_is_one_line_with_its_install(venv: Venv, tmp_path: Path) -> None:
    proc = venv.run("info", "s3://bucket/checkpoint")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "pip install 'stateglass[s3]'" in proc.stderr
    metrics = venv.run("metrics", "--db", str(tmp_path / "sg.duckdb"), "--port", str(free_port()))
    assert metrics.returncode == 2
    assert "pip install 'stateglass[metrics]'" in metrics.stderr
    assert "Traceback" not in metrics.stderr


def test_the_dashboard_answers_on_loopback(venv: Venv, tmp_path: Path) -> None:
    port = free_port()
    db = str(tmp_path / "sg.duckdb")
    args = ["dashboard", str(SAMPLE), "--db", db, "--port", str(port), "--headless"]
    proc = subprocess.Popen(
        [str(venv.root / "bin" / "stateglass"), *args],
        cwd=venv.home,
        env=venv.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert _answers(proc, f"http://127.0.0.1:{port}/_stcore/health") == b"ok"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
    assert "Traceback" not in err, err


def _answers(proc: subprocess.Popen[bytes], url: str) -> bytes:
    deadline = time.monotonic() + DASHBOARD_DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the dashboard exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as page:
                return bytes(page.read())
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.05)
    pytest.fail(f"{url} did not answer within {DASHBOARD_DEADLINE_S:.0f} s")


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[str]:
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        client = boto3.client("s3", endpoint_url=endpoint, **_credentials(endpoint))
        client.create_bucket(Bucket="wheel")
        upload_tree(client, "wheel", SAMPLE, "agg-hdfs")
        yield endpoint
    finally:
        server.stop()


def _credentials(endpoint: str) -> dict[str, str]:
    env = env_for(endpoint)
    return {
        "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
        "region_name": env.get("AWS_DEFAULT_REGION", "us-east-1"),
    }


def test_the_s3_extra_reads_a_checkpoint_from_moto(
    venv: Venv, wheel: Path, moto_s3: str, tmp_path: Path
) -> None:
    # Last in this module: it adds s3fs to the venv the core tests above ran without.
    venv.pip("install", "--quiet", f"{wheel}[s3]")
    env = {**env_for(moto_s3), "STATEGLASS_CACHE_DIR": str(tmp_path / "cache")}
    local = venv.run("info", str(SAMPLE), "--json")
    remote = venv.run("info", "s3://wheel/agg-hdfs", "--json", env=env)
    assert remote.returncode == 0, remote.stderr
    seen, expected = json.loads(remote.stdout), json.loads(local.stdout)
    for key in ("committed_batches", "stores", "shuffle_partitions"):
        assert seen[key] == expected[key], key
    assert shutil.which("stateglass", path=str(venv.root / "bin"))


def test_the_readme_notebook_example_prints_what_the_readme_shows(
    venv: Venv, tmp_path: Path
) -> None:
    # The example names sample_checkpoints/ as a clone has it; the virtualenv's folder gets a
    # link to them, so the example runs as written, against the installed package only.
    link = venv.home / "sample_checkpoints"
    if not link.exists():
        link.symlink_to(SAMPLES, target_is_directory=True)
    code, shown = notebook_example()
    script = tmp_path / "example.py"
    where = "\nimport stateglass as _sg\nprint('stateglass from', _sg.__file__)\n"
    script.write_text(code + where)
    proc = subprocess.run(
        [venv.python, str(script)],
        cwd=venv.home,
        env=venv.env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    *printed, last = proc.stdout.splitlines(keepends=True)
    installed = last.rstrip("\n").removeprefix("stateglass from ")
    assert Path(installed).is_relative_to(_site_packages(venv)), installed
    # The README shows exactly what the example prints (the sample checkpoints are fixed).
    assert "".join(printed) == shown
