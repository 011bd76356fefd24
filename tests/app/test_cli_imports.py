"""`stateglass collect` imports only what collecting needs (with `--jobs 2` the start-up is
serial, and it bounds the speed-up on 2 cores). Each case runs a fresh interpreter: in this
test process everything is imported already."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import SAMPLES

# Heavy modules a collect never needs: the dashboard, figures and reports (streamlit, plotly,
# pandas), Spark, Arrow, numpy (the writer binds plain lists), the `duckdb` package's Python
# layer (the writer uses the engine module `_duckdb`). importlib.metadata is allowed: state store
# readers are found through their entry points (collectors/stores), about 35 ms once.
NOT_FOR_COLLECT = (
    "streamlit",
    "plotly",
    "pandas",
    "pyspark",
    "pyarrow",
    "numpy",
    "duckdb",
    "stateglass.app.output",
    "stateglass.app.parallel",
    "stateglass.app.report",
    "stateglass.collectors.progress",
)

PROBE = """
import json, sys
from stateglass.app.cli import main
status = main(sys.argv[1:])
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""


def _run(*argv: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True
    )
    return dict(json.loads(out.stdout.splitlines()[-1]))


def test_collect_imports_no_dashboard_spark_or_numpy(tmp_path: Path) -> None:
    cp = SAMPLES / "spark-4.3" / "agg-hdfs"
    found = _run("collect", str(cp), "--db", str(tmp_path / "sg.duckdb"), "--jobs", "1")
    assert found["status"] == 0
    modules = set(found["modules"])  # type: ignore[call-overload]
    loaded = sorted(m for m in NOT_FOR_COLLECT if m in modules)
    assert loaded == []
    # The engine module did the writing, and the rows are there for the package's readers.
    assert "_duckdb" in modules
    import duckdb

    with duckdb.connect(str(tmp_path / "sg.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM state_versions").fetchall()[0][0] > 0


def test_help_still_lists_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stateglass.app.cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    from stateglass.app.commands import COMMANDS

    names = [c.name for c in COMMANDS]
    listed = [name for name in names if f"\n    {name} " in out or f"\n    {name}\n" in out]
    assert listed == names


def test_compat_labels_cover_every_status() -> None:
    """compat spells the statuses out so that building the parser does not import the
    rules: they must stay the rules' own."""
    from stateglass.app.analysis.compat import rules
    from stateglass.app.commands.compat import _LABEL

    statuses = {rules.SAME, rules.COMPATIBLE, rules.NEW, rules.NOTE, rules.CAVEAT, rules.REFUSE}
    assert set(_LABEL) == statuses


def test_the_command_table_says_what_each_command_reads() -> None:
    """Reading checkpoints brings the remote storage options; reading the database, --db."""
    from stateglass.app.cli import build_parser
    from stateglass.app.commands import COMMANDS, Reads

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subparsers.choices) == [c.name for c in COMMANDS]
    for command in COMMANDS:
        options = {o for a in subparsers.choices[command.name]._actions for o in a.option_strings}
        assert ("--storage-option" in options) == (Reads.CHECKPOINTS in command.reads), command
        assert ("--db" in options) == (Reads.DATABASE in command.reads), command


# A `stateglass sql` process of its own: pandas, plotly and streamlit stay out, though the
# catalog's tables are Arrow datasets (whose module would import pandas: app/lean_arrow.py).
SQL_PROBE = """
import json, sys
from stateglass.app.cli import main
sys.argv = ["stateglass", *sys.argv[1:]]
status = main()
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""


# What a query that reads one partition's count never needs: the other commands, the engines
# that collect (multiprocessing), the health rules' settings (no --config) and numpy.ma
# (pyarrow imports it to convert a NumPy array). Each was 10 ms or more of its start-up.
NOT_FOR_A_SQL_QUERY = (
    "multiprocessing",
    "numpy.ma",
    "stateglass.app.analysis.thresholds",
    "stateglass.app.commands.collect",
    "stateglass.collectors.engines.local",
    "stateglass.collectors.scan.chains",
)


def sql_process(query: str) -> tuple[list[str], set[str]]:
    """The CSV lines a whole ``stateglass sql`` process prints for ``query`` on the HDFS
    aggregation sample, and the modules it had loaded when it ended."""
    cp = SAMPLES / "spark-4.3" / "agg-hdfs"
    out = subprocess.run(
        [sys.executable, "-c", SQL_PROBE, "sql", str(cp), "-e", query, "--format", "csv"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    found = json.loads(out[-1])
    assert found["status"] == 0
    return out[:-1], set(found["modules"])


def test_sql_process_imports_no_pandas() -> None:
    lines, modules = sql_process(
        "SELECT count(*) AS n FROM agg_hdfs.op0_default WHERE value.count > 0"
    )
    assert lines[:2] == ["n", "14"]
    assert "pyarrow.dataset" in modules
    assert sorted(m for m in ("pandas", "plotly", "streamlit") if m in modules) == []


def test_a_short_sql_query_imports_only_what_it_reads() -> None:
    lines, modules = sql_process(
        "SELECT count(*) AS n FROM agg_hdfs.op0_default WHERE partition_id = 0"
    )
    assert lines[0] == "n"
    assert sorted(m for m in NOT_FOR_A_SQL_QUERY if m in modules) == []
