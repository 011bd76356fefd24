"""Hostile and damaged files: peak RSS, bytes under TMPDIR and time of each CLI run.

Usage::

    .venv/bin/python benchmarks/bench_hostile.py

Builds, from copies of the real sample checkpoints, the LZ4 bomb (valid 1 MiB LZ4 blocks of a
real 64-byte record, ~4 MiB expanding to 1 GiB), the zip bomb (a real RocksDB zip whose WAL
entry inflates to 1 GiB, ~1 MiB), a bomb small enough to pass once the ratio limit is raised,
and a truncated and an empty file of every kind; runs the CLI on each in a child process
(``tests/damage/hostile.run_measured``: peak RSS from ``wait4``, TMPDIR sampled every 5 ms).
Prints a Markdown table for the "Hostile files" section of docs/benchmarks.md.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.damage.hostile import (
    copy_sample,
    delta_without_snapshot,
    first_record,
    last_batch,
    lz4_bomb,
    run_measured,
    store_files,
    zip_bomb,
)


def _version(path: Path) -> int:
    return int(path.name.split(".")[0].split("_")[0])


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    rows: list[tuple[str, str, int, int, int, float, int]] = []

    def measure(label: str, cmd: str, *args: str, env: dict[str, str] | None = None) -> None:
        tmp = base / f"tmp-{len(rows)}"
        saved = dict(os.environ)
        os.environ.update(env or {})
        try:
            run = run_measured(cmd, *args, tmpdir=tmp)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        rows.append(
            (
                label,
                cmd,
                run.returncode,
                run.peak_rss,
                run.peak_tmp,
                run.seconds,
                len(run.stderr.strip().splitlines()),
            )
        )

    try:
        hdfs = copy_sample("dedup-hdfs", base / "lz4")
        delta = delta_without_snapshot(hdfs)
        delta.write_bytes(lz4_bomb(first_record(delta)))
        size = delta.stat().st_size
        batch = str(_version(delta) - 1)
        for cmd, args in (
            ("state", (str(hdfs), "--batch-id", batch)),
            ("collect", (str(hdfs), "--db", str(base / "a.duckdb"))),
            ("check", (str(hdfs), "--db", str(base / "b.duckdb"))),
        ):
            measure(f"LZ4 bomb ({size / 2**20:.1f} MiB → 1 GiB)", cmd, *args)

        rocks = copy_sample("agg-rocks", base / "zip")
        zip_path = store_files(rocks, ".zip")[-1]
        zip_path.write_bytes(zip_bomb(zip_path))
        size = zip_path.stat().st_size
        batch = str(_version(zip_path) - 1)
        for cmd, args in (
            ("state", (str(rocks), "--batch-id", batch)),
            ("collect", (str(rocks), "--db", str(base / "c.duckdb"))),
        ):
            measure(f"zip bomb ({size / 2**20:.1f} MiB, 1 GiB entry)", cmd, *args)

        small = copy_sample("dedup-hdfs", base / "small")
        delta = delta_without_snapshot(small)
        delta.write_bytes(lz4_bomb(first_record(delta), size=128 << 20))
        args = (str(small), "--batch-id", str(_version(delta) - 1), "--partition", "0")
        measure("LZ4 128 MiB, default limits", "state", *args)
        measure(
            "LZ4 128 MiB, STATEGLASS_MAX_RATIO=1000",
            "state",
            *args,
            env={"STATEGLASS_MAX_RATIO": "1000"},
        )

        for kind, sample, pick in (
            ("delta", "agg-hdfs", lambda cp: delta_without_snapshot(cp)),
            ("snapshot", "agg-hdfs", lambda cp: store_files(cp, ".snapshot")[-1]),
            ("zip", "agg-rocks", lambda cp: store_files(cp, ".zip")[-1]),
            ("offsets", "agg-hdfs", lambda cp: cp / "offsets" / str(last_batch(cp))),
        ):
            for how in ("truncated", "empty"):
                cp = copy_sample(sample, base / f"{kind}-{how}")
                path = pick(cp)
                data = path.read_bytes()
                path.write_bytes(data[: len(data) // 2] if how == "truncated" else b"")
                batch = str(
                    min(_version(path) - 1, last_batch(cp)) if kind != "offsets" else last_batch(cp)
                )
                measure(f"{how} {kind}", "state", str(cp), "--batch-id", batch)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print(
        f"{dt.date.today()}, {platform.node()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} / {os.getloadavg()[1]:.2f} at the start"
    )
    print()
    print("| file | command | exit | stderr lines | peak RSS | peak TMPDIR bytes | time |")
    print("|---|---|---|---|---|---|---|")
    for label, cmd, code, rss, tmp, secs, lines in rows:
        print(
            f"| {label} | `{cmd}` | {code} | {lines} | {rss / 2**20:.0f} MiB | {tmp} | "
            f"{secs:.1f} s |"
        )


if __name__ == "__main__":
    main()
