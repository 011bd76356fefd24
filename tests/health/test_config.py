"""The health config file: documented defaults, overrides, and one-line errors naming the file."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from stateglass.app.analysis.health import HealthConfig
from stateglass.app.settings import load_settings
from stateglass.collectors.errors import BadConfig


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "health.toml"
    path.write_text(text)
    return str(path)


def test_no_file_means_the_defaults() -> None:
    config = load_settings(None).health
    assert config == HealthConfig()
    assert config.spark.min_deltas_for_snapshot == 10
    assert config.spark.min_batches_to_retain == 100
    assert config.enabled("stalled_query")


def test_a_file_overrides_only_what_it_names(tmp_path: Path) -> None:
    config = load_settings(
        _write(
            tmp_path,
            "[spark]\nmin_deltas_for_snapshot = 50\n\n"
            "[stalled_query]\nenabled = false\nwarn_factor = 3\n\n"
            "[partition_skew]\nmin_bytes = 0\n",
        )
    ).health
    assert config.spark.min_deltas_for_snapshot == 50
    assert config.spark.min_batches_to_retain == 100
    assert not config.enabled("stalled_query")
    assert config.stalled_query.warn_factor == 3.0
    assert isinstance(config.stalled_query.warn_factor, float)
    assert config.partition_skew.min_bytes == 0
    assert config.partition_skew.warn_ratio == HealthConfig().partition_skew.warn_ratio


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("[stalled]\nwarn_factor = 3\n", "unknown section [stalled]", id="section"),
        pytest.param("[holes]\nenable = false\n", "unknown key 'enable' in [holes]", id="key"),
        pytest.param(
            "[stuck_batch]\nwarn_factor = 'ten'\n",
            "[stuck_batch] warn_factor must be a number, got 'ten'",
            id="type",
        ),
        pytest.param(
            "[spark]\nmin_batches_to_retain = 2.5\n",
            "[spark] min_batches_to_retain must be a whole number",
            id="float-for-int",
        ),
        pytest.param(
            "[orphans]\nmin_age_seconds = -1\n", "must not be negative, got -1", id="negative"
        ),
        pytest.param("[holes]\nenabled = 1\n", "[holes] enabled must be true or false", id="bool"),
        pytest.param("[spark\n", "not valid TOML", id="syntax"),
        pytest.param("spark = 3\n", "[spark] must be a table of keys", id="not-a-table"),
    ],
)
def test_bad_files_are_one_line_errors_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(BadConfig) as info:
        load_settings(path)
    line = str(info.value)
    assert line.startswith(path + ": ")
    assert message in line
    assert "\n" not in line


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BadConfig, match="no such config file"):
        load_settings(str(tmp_path / "nope.toml"))


def _documented_defaults() -> dict[str, dict[str, str]]:
    """``{section: {key: default}}`` from the tables and the ``[spark]`` text of docs/health.md."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "health.md").read_text()
    out: dict[str, dict[str, str]] = {"spark": {}}
    for key, value in re.findall(r"`\[spark\] (\w+)` \(default (\d+|true|false)\)", text):
        out["spark"][key] = value
    for section, body in re.findall(r"^### `(\w+)`.*?\n(.*?)(?=^### |\Z)", text, re.S | re.M):
        rows = re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", body, re.M)
        out[section] = {key: value.split()[0] for key, value in rows}
    return out


def test_docs_state_the_defaults_of_the_code() -> None:
    documented = _documented_defaults()
    defaults = HealthConfig()
    assert set(documented) == {f.name for f in fields(defaults)}
    for section, keys in documented.items():
        current = getattr(defaults, section)
        thresholds = {f.name: getattr(current, f.name) for f in fields(current)}
        thresholds.pop("enabled", None)
        # Every threshold is documented, with the value the code uses.
        assert set(keys) == set(thresholds), section
        for key, value in keys.items():
            if isinstance(thresholds[key], bool):
                assert value == str(thresholds[key]).lower(), (section, key, value)
                continue
            assert float(value) == thresholds[key], (section, key, value)
