"""A real Spark standalone cluster on 127.0.0.1: one master and two workers, separate JVMs.

Started from PySpark's own ``bin/spark-class``, each worker with its own work directory, one
core and 512 MB. The JVMs get an environment without our venv: executors run the *base*
interpreter, and apps choose its ``PYTHONPATH`` (``spark.executorEnv.PYTHONPATH``). Pointing
it at the venv's site-packages gives the compiled dependencies but not StateGlass: the
editable install's ``.pth`` hook is processed only for site directories, never for
``PYTHONPATH`` entries. :func:`spark_env` writes the ``spark-defaults.conf`` an app uses.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

from tests.jvm import SPARK_CONF, jvm_options

SPARK_HOME = Path(pyspark.__file__).parent
# The interpreter the venv was made from: same version, none of the venv's packages.
BASE_PYTHON = os.path.realpath(sys.executable)
VENV_SITE = sysconfig.get_paths()["purelib"]
START_TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def jvm_env() -> dict[str, str]:
    """This environment without the venv or any Python path: what a cluster node has."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYSPARK_", "PYTHON", "VIRTUAL_ENV", "SPARK_"))
    }
    venv_bin = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["SPARK_HOME"] = str(SPARK_HOME)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_DAEMON_MEMORY"] = "256m"
    env["SPARK_DAEMON_JAVA_OPTS"] = jvm_options()
    return env


@dataclass
class Cluster:
    master_url: str
    ui_port: int
    procs: list[subprocess.Popen[bytes]]
    logs: Path

    def alive_workers(self) -> int:
        """Workers registered with the master; 0 while its web UI is still starting (it
        answers ``/json/`` with its HTML page until the JSON handler is attached)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            try:
                return int(json.load(r).get("aliveworkers", 0))
            except json.JSONDecodeError:
                return 0

    def log_tail(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in self.logs.glob("*.log"))


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=log.parent,
            start_new_session=True,  # its own process group: killed as one at the end
        )


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate each JVM's process group, then kill what is left after 10 s."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@contextmanager
def standalone_cluster(tmp: Path, workers: int = 2) -> Iterator[Cluster]:
    """A master and ``workers`` workers, all on 127.0.0.1 and free ports; stopped on exit."""
    env = jvm_env()
    logs = tmp / "logs"
    logs.mkdir(parents=True)
    port, ui_port = free_port(), free_port()
    procs: list[subprocess.Popen[bytes]] = []
    cluster = Cluster(f"spark://127.0.0.1:{port}", ui_port, procs, logs)
    try:
        master = "org.apache.spark.deploy.master.Master --host 127.0.0.1"
        master_args = [*master.split(), "--port", str(port), "--webui-port", str(ui_port)]
        procs.append(_start(master_args, logs / "master.log", env))
        for n in range(workers):
            work = tmp / f"worker{n}"
            work.mkdir()
            worker = "org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores 1"
            worker_args = [
                *worker.split(),
                *("--memory", "512m", "--port", str(free_port())),
                *("--webui-port", str(free_port())),
                *("--work-dir", str(work), cluster.master_url),
            ]
            procs.append(_start(worker_args, logs / f"worker{n}.log", env))
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if cluster.alive_workers() == workers:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"the cluster did not start:\n{cluster.log_tail()}")
            time.sleep(0.1)
        yield cluster
    finally:
        stop(procs)


def spark_env(conf_dir: Path, python_path: list[str], **conf: str) -> dict[str, str]:
    """Environment for a driver (``stateglass`` or a probe) that runs its executors on the
    base interpreter with ``python_path``; extra ``conf`` goes into spark-defaults.conf."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(python_path),
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.driver.memory": "512m",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.stateglass.executorTimeout": "60",
        "spark.driver.extraJavaOptions": jvm_options(),
        "spark.executor.extraJavaOptions": jvm_options(),
        **SPARK_CONF,
        **conf,
    }
    (conf_dir / "spark-defaults.conf").write_text(
        "".join(f"{k} {v}\n" for k, v in settings.items())
    )
    env = jvm_env()
    env["PATH"] = os.environ.get("PATH", "")
    env["SPARK_CONF_DIR"] = str(conf_dir)
    env["PYSPARK_PYTHON"] = BASE_PYTHON
    return env
