"""Retention on a checkpoint written by ``stateglass rewrite``: its state starts at the batch
it was written from (its ``stateglass-rewrite.json`` says which), while its offsets and commits
logs go back to batch 0. The batches before are not counted as lost; without the mark they
are, as for any checkpoint whose older state is gone."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from stateglass.app.cli import main
from tests.conftest import SAMPLES

STORY = SAMPLES / "demo" / "leaking-windows"
CONFIG = str(SAMPLES / "demo.toml")


def _retention(checkpoint: Path) -> str:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        main(["check", str(checkpoint), "--config", CONFIG])
    return next(line for line in out.getvalue().splitlines() if " retention " in line)


def test_a_rewritten_checkpoint_counts_batches_from_its_state(tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    with redirect_stdout(io.StringIO()):
        assert main(["rewrite", str(STORY), str(dst), "--evict-expired", "--apply"]) == 0
    line = _retention(dst)
    assert line.startswith("OK") and "state written by stateglass rewrite at batch 7" in line, line
    # Older state files removed by hand look the same but for the mark: lost history.
    (dst / "stateglass-rewrite.json").unlink()
    line = _retention(dst)
    assert line.startswith("WARN") and "stateglass rewrite" not in line, line
