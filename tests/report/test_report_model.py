"""The report's pieces without a browser: big stores stay small, findings order, escaping."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from stateglass.app.escape import plot_text
from stateglass.app.report import html, markdown
from stateglass.app.report.charts import (
    MAX_COLUMNS,
    every_nth_version,
    largest_per_run,
    store_charts,
)
from stateglass.app.report.model import StoreData, load_report
from tests.conftest import SAMPLES


@dataclass(frozen=True)
class FakeFinding:
    rule: str
    title: str
    status: str
    finding: str
    hint: str


FINDINGS = (
    FakeFinding("a_ok", "Fine thing", "OK", "all good", ""),
    FakeFinding("b_err", "Broken thing", "ERR", "3 deltas missing </script><script>x()", "fix it"),
    FakeFinding("c_warn", "Odd thing", "WARN", "skew 5.1×", "repartition"),
)


def _versions(partitions: int, versions: int) -> pd.DataFrame:
    """Per (partition, version) rows shaped like ``queries.state_versions``."""
    rng = np.random.default_rng(7)
    p, v = np.meshgrid(np.arange(partitions), np.arange(1, versions + 1), indexing="ij")
    keys = (v * (10 + p % 7) + rng.integers(0, 5, p.shape)).ravel()
    return pd.DataFrame(
        {
            "partition_id": p.ravel(),
            "version": v.ravel(),
            "batch_id": v.ravel() - 1,
            "num_keys": keys,
            "bytes": keys * 30,
        }
    )


def _big_store(base: StoreData, partitions: int, versions: int) -> StoreData:
    frame = _versions(partitions, versions)
    per_version = frame.groupby("version", as_index=False).agg(
        num_keys=("num_keys", "sum"),
        max_keys=("num_keys", "max"),
        median_keys=("num_keys", "median"),
    )
    growth = per_version.assign(
        batch_id=per_version["version"] - 1,
        keys_added=per_version["num_keys"].diff().fillna(0),
        keys_updated=5,
        keys_removed=0,
    )
    skew = per_version.assign(skew=per_version["max_keys"] / per_version["median_keys"])
    last = frame[frame["version"] == versions]
    lag = pd.DataFrame(
        {
            "partition_id": last["partition_id"],
            "latest_version": versions,
            "versions_since_snapshot": last["partition_id"] % 10,
            "replay_bytes": last["bytes"],
        }
    )
    files = pd.DataFrame({"version": per_version["version"], "kind": "delta", "bytes": 1000})
    return dataclasses.replace(base, versions=frame, growth=growth, skew=skew, lag=lag, files=files)


def test_every_nth_version_keeps_the_newest() -> None:
    frame = _versions(3, 1000)
    kept, step = every_nth_version(frame, 250)
    versions = sorted(set(kept["version"]))
    assert step == 4 and len(versions) == 250 and versions[-1] == 1000
    assert np.all(np.diff(versions) == 4)
    small, step = every_nth_version(_versions(3, 40), 250)
    assert step == 1 and len(small) == 120


def test_largest_per_run_keeps_spikes_and_real_rows() -> None:
    frame = pd.DataFrame(
        {"batch_id": range(1000), "duration_ms": [10] * 1000, "other": range(1000)}
    )
    frame.loc[617, "duration_ms"] = 9_000
    frame["duration_ms"] = frame["duration_ms"].astype("Int64")  # as DuckDB gives it
    frame.loc[3, "duration_ms"] = pd.NA
    kept, step = largest_per_run(frame, "batch_id", "duration_ms", 250)
    assert step == 4 and len(kept) == 250
    assert 9_000 in set(kept["duration_ms"])
    spike = kept[kept["duration_ms"] == 9_000]
    assert list(spike["other"]) == [617], "the row shown is the real batch"
    assert kept["batch_id"].max() >= 996, "runs count back from the newest batch"
    files = pd.DataFrame(
        {
            "version": [v for v in range(1, 601) for _ in range(2)],
            "kind": ["delta", "snapshot"] * 600,
            "bytes": [
                100 if k == 0 else (5000 if v % 10 == 0 else 0)
                for v in range(1, 601)
                for k in range(2)
            ],
        }
    )
    kept, step = largest_per_run(files, "version", "bytes", 250)
    assert step == 3
    assert kept.groupby("version").size().eq(2).all(), "every kind of a kept version"
    small, step = largest_per_run(frame.head(100), "batch_id", "duration_ms", 250)
    assert step == 1 and len(small) == 100


def test_a_big_store_makes_a_small_report(report_db: str) -> None:
    data = load_report(report_db, str(SAMPLES / "spark-4.3/agg-hdfs"), findings=FINDINGS)
    big = _big_store(data.stores[0], partitions=200, versions=1000)
    data = dataclasses.replace(data, stores=(big,))

    group = store_charts(big)
    heatmap = next(c.figure for c in group.charts if c.figure.data[0].type == "heatmap")
    assert len(heatmap.data[0].x) <= MAX_COLUMNS
    assert "1,000 versions" in group.note and "every 4th version" in group.note
    for chart in group.charts:
        for trace in chart.figure.data:
            if trace.type != "heatmap" and trace.x is not None and len(trace.x) > 200:
                assert len(trace.x) <= MAX_COLUMNS, chart.figure.layout.title.text

    text = html.render(data)
    figures = text[text.index('id="sg-figures">') :]
    assert len(figures) < 2_000_000, "charts are aggregated, not 200k points"
    assert len(text) < 10_000_000
    assert "every 4th version" in text
    assert big.keys_now == int(big.versions.query("version == 1000")["num_keys"].sum())


@pytest.mark.parametrize("name", ["demo/healthy", "spark-4.3/join-hdfs"])
def test_a_small_checkpoint_makes_a_report_under_one_megabyte(report_db: str, name: str) -> None:
    """plotly.js is inlined once, packed, and the figures share one template."""
    text = html.render(load_report(report_db, str(SAMPLES / name)))
    assert len(text.encode("utf-8")) < 1_000_000
    assert text.count('id="sg-plotly"') == 1


def test_findings_worst_first_and_escaped(report_db: str) -> None:
    data = load_report(report_db, str(SAMPLES / "spark-4.3/dedup-hdfs"), findings=FINDINGS)
    assert data.verdict == "ERR"
    text = html.render(data)
    health = text[text.index('id="health"') : text.index('id="numbers"')]
    assert health.index("Broken thing") < health.index("Odd thing") < health.index("Fine thing")
    assert "</script><script>x()" not in text
    assert "&lt;/script&gt;&lt;script&gt;x()" in health
    md = markdown.render(data)
    assert md.startswith("# StateGlass report: dedup-hdfs — ERR")
    assert md.index("Broken thing") < md.index("Odd thing") < md.index("Fine thing")
    assert "* **Broken thing**: fix it" in md


def test_figure_json_cannot_close_its_script(report_db: str) -> None:
    data = load_report(report_db, str(SAMPLES / "spark-4.3/agg-hdfs"), findings=())
    evil = "</script><!--x"
    inputs = pd.DataFrame({"batch_id": [1, 2], "source": evil, "amount": [3, 4], "unit": "rows"})
    text = html.render(dataclasses.replace(data, inputs=inputs))
    assert evil not in text
    payload = text[text.index('id="sg-figures">') + len('id="sg-figures">') :]
    specs = json.loads(payload[: payload.index("</script>")])
    names = [t.get("name") for s in specs for t in s["figure"]["data"]]
    # Plotly shows entities as characters: the trace name reads as the source's own name.
    assert f"{plot_text(evil)} (rows)" in names, "the text survives, escaped, inside the JSON"
    assert len(specs) == int(re.search(r'data-charts="(\d+)"', text).group(1))


def test_many_findings_of_one_rule_are_folded(report_db: str) -> None:
    holes = tuple(
        FakeFinding("holes", "Holes", "ERR", f"partition {p}: no file for version 9", "restore it")
        for p in range(12)
    )
    data = load_report(report_db, str(SAMPLES / "spark-4.3/agg-hdfs"), findings=holes + FINDINGS)
    md = markdown.render(data)
    assert sum("no file for version 9" in line for line in md.splitlines()) == 5
    assert "| ERR ✖ | Holes | 7 more |" in md
    assert md.count("restore it") == 1, "one hint per rule, not one per partition"
    text = html.render(data)
    folded = text[text.index("<details>") : text.index("</details>")]
    assert "7 more like these" in folded and folded.count("<li>") == 7
    assert "partition 11: no file for version 9" in folded
    assert text.count("What to do: restore it") == 1
