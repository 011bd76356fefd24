"""Run on a cluster's executors: is StateGlass there before the engine ships it?

Usage: ``python -m tests.collectors.cluster_probe MASTER DECOY_DIR`` with the environment of
:func:`tests.collectors.cluster.spark_env`. Prints one JSON line per partition: the
``collectors`` the worker holds (the decoy, another job's module imported by its
``sitecustomize``), then what ``import stateglass.collectors`` finds: nothing, if StateGlass
is not on the worker's path by accident.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator


def probe(_decoy: str, _: Iterator[int]) -> Iterator[str]:
    import importlib
    import importlib.util

    out: dict[str, object] = {"python": sys.executable}
    held = sys.modules.get("collectors")
    out["held"] = getattr(held, "__file__", None)
    try:
        out["plain"] = importlib.import_module("stateglass.collectors").__file__
    except ImportError as exc:
        out["plain"] = f"{type(exc).__name__}: {exc}"
    for dep in ("lz4", "rocksdict", "zstandard"):
        out[dep] = importlib.util.find_spec(dep) is not None
    yield json.dumps(out)


def main(master: str, decoy: str) -> None:
    from functools import partial

    from pyspark import SparkContext

    sc = SparkContext(master, "stateglass-probe")
    try:
        for line in sc.parallelize(range(2), 2).mapPartitions(partial(probe, decoy)).collect():
            print(line, flush=True)
    finally:
        sc.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
