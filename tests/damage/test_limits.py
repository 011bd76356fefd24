"""Where the decompression limits come from: defaults, environment, a check --config file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.app.settings import load_settings
from stateglass.collectors import limits
from stateglass.collectors.errors import BadConfig
from stateglass.parsers.compression import decompress
from stateglass.parsers.errors import LimitExceeded
from stateglass.parsers.limits import DecodeLimits
from tests.damage.hostile import SAMPLES, after_last_commit, copy_sample, store_files


def test_budget() -> None:
    assert DecodeLimits().budget(10) == 16 << 20  # the floor
    assert DecodeLimits().budget(1 << 20) == 64 << 20  # the ratio
    assert DecodeLimits().budget(1 << 30) == 2 << 30  # the absolute cap
    assert DecodeLimits(max_file_bytes=0).budget(1 << 30) == 64 << 30  # no cap


@pytest.mark.parametrize(
    ("text", "value"), [("2GiB", 2 << 30), ("512m", 512 << 20), ("100", 100), ("1 KB", 1024)]
)
def test_parse_size(text: str, value: int) -> None:
    assert limits.parse_size(text) == value


def test_environment() -> None:
    got = limits.from_env({"STATEGLASS_MAX_RATIO": "200", "STATEGLASS_MAX_FILE_BYTES": "8GiB"})
    assert got == DecodeLimits(max_ratio=200, max_file_bytes=8 << 30)
    with pytest.raises(BadConfig, match="STATEGLASS_MIN_BYTES"):
        limits.from_env({"STATEGLASS_MIN_BYTES": "lots"})


def test_config_keys_override_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "health.toml"
    path.write_text("[limits]\nmax_ratio = 500\n")
    base = limits.from_env({"STATEGLASS_MAX_RATIO": "200", "STATEGLASS_MIN_BYTES": "1MiB"})
    assert load_settings(str(path)).health.limits.over(base) == DecodeLimits(500, 1 << 20)
    path.write_text("[limits]\nmax_ratio = -1\n")
    with pytest.raises(BadConfig, match="must not be negative"):
        load_settings(str(path))


def test_a_real_file_over_a_tiny_budget() -> None:
    snap = store_files(SAMPLES / "spark-4.3" / "agg-hdfs", ".snapshot")[-1]
    data = snap.read_bytes()
    assert decompress("lz4", data)
    with pytest.raises(LimitExceeded, match="decompression limit"):
        decompress("lz4", data, DecodeLimits(max_ratio=1, min_bytes=0))


def test_check_applies_the_config_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = copy_sample("agg-hdfs", tmp_path)
    config = tmp_path / "health.toml"
    config.write_text("[limits]\nmax_file_bytes = 1024\nmin_bytes = 0\n")
    args = ["check", str(cp), "--json", "--now", after_last_commit(cp)]
    code = main([*args, "--db", str(tmp_path / "a.duckdb"), "--config", str(config)])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert code == 2
    damaged = [f for f in findings if f["rule"] == "damaged_files"]
    listed = [f for f in damaged if "more damaged files" not in f["finding"]]
    assert listed and all("decompression limit" in f["finding"] for f in listed)
    # The limits held only for that run.
    assert limits.active() == limits.from_env()
    assert main([*args, "--db", str(tmp_path / "b.duckdb")]) == 0
