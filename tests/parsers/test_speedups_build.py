"""Which path the readers run, compiled or pure Python, is the one the build and the switch say.

Not gated on the extension: with ``STATEGLASS_PURE=1`` this module proves the readers really
run pure Python, and otherwise that a build which should have produced the extension did.
"""

from __future__ import annotations

import os
import subprocess
import sys

from stateglass.app.render import bytes_to_json
from stateglass.parsers import hdfs_files as records
from tests.conftest import ROOT
from tests.parsers.compiled import pure_requested, speedups_expected


def test_the_switch_picks_the_path() -> None:
    if pure_requested():
        assert records._speedups is None and bytes_to_json._speedups is None
    elif speedups_expected():
        assert records._speedups is not None, "the compiled speedups were not built"
        assert bytes_to_json._speedups is records._speedups
    else:
        assert records._speedups is None


def test_pure_python_can_be_forced() -> None:
    env = {**os.environ, "STATEGLASS_PURE": "1"}
    probe = (
        "import stateglass.parsers.hdfs_files as r, stateglass.app.render.bytes_to_json as j; "
        "print(r._speedups, j._speedups)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "None"]
