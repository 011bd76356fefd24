"""``stateglass rewrite --apply`` (a reshape, and one with ``--drop-keys``) killed with SIGKILL at
20 points of its writing: never a checkpoint at DST, SRC unchanged, and the next run to the same
DST cleans the killed run's leftovers (only those) and succeeds.

The kill points are events, not clocks: the command runs in a child process whose audit hook
reports every file-system change under the test's directory (a file opened for writing, a
directory made, a rename, a removal) and waits for a byte from the test before doing it. The
test lets a seeded random number of them through, then kills the child either while it waits
(before the change) or right after letting it go (during or just after the change).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.collectors.rewrite.destination import temp_siblings
from stateglass.collectors.rewrite.owner import OWNER_SUFFIX, OwnerMark
from tests.collectors.helpers import tree_digest
from tests.conftest import copy_until

AGG = Path(__file__).parents[2] / "sample_checkpoints" / "spark-4.3" / "agg-hdfs"
RUNS = 20

# The child: ``python -c _CHILD EVENTS_FD GO_FD WATCHED stateglass-args...``.
_CHILD = r"""
import os, sys
events, go, watched = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
CHANGES = {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree"}

def pause_before_change(event, args):
    if event == "open":
        path, _, flags = args
        if not isinstance(flags, int) or not flags & (os.O_WRONLY | os.O_RDWR):
            return
    elif event in CHANGES:
        path = args[0]
    else:
        return
    if isinstance(path, (str, os.PathLike)) and os.fspath(path).startswith(watched):
        os.write(events, b".")
        os.read(go, 1)

sys.addaudithook(pause_before_change)
from stateglass.app.cli import main
sys.exit(main(sys.argv[4:]))
"""


def _run_killed_at(args: list[str], watched: Path, kill_at: int | None, let_go: bool) -> int:
    """Run ``stateglass *args``; SIGKILL it at change number ``kill_at`` (None: never). The
    number of changes it announced."""
    events_r, events_w = os.pipe()
    go_r, go_w = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(events_w), str(go_r), str(watched), *args],
        pass_fds=(events_w, go_r),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(events_w)
    os.close(go_r)
    seen = 0
    try:
        while os.read(events_r, 1):
            seen += 1
            if seen == kill_at:
                if let_go:
                    os.write(go_w, b".")
                child.kill()
                break
            os.write(go_w, b".")
        _, err = child.communicate(timeout=120)
    finally:
        os.close(events_r)
        os.close(go_w)
    if kill_at is None:
        assert child.returncode == 0, err.decode()
    else:
        assert child.returncode == -9, err.decode()
    return seen


def _is_checkpoint(dst: Path) -> bool:
    return all((dst / name).exists() for name in ("metadata", "offsets", "commits"))


def _shape(root: Path) -> dict[str, int]:
    """Relative path → size of every file under ``root``."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


# A reshape alone, and one that drops keys too (its predicate runs in a SQL session first).
EDITS = [
    pytest.param([], id="reshape"),
    pytest.param(["--drop-keys", "0/default", "key.grp = 'zeta'"], id="drop-keys"),
]


@pytest.mark.slow
@pytest.mark.parametrize("edit", EDITS)
def test_a_rewrite_killed_anywhere_leaves_no_checkpoint_and_the_next_run_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: list[str]
) -> None:
    src = copy_until(AGG, tmp_path / "src", 3)
    before = tree_digest(src)
    out = tmp_path / "out"
    out.mkdir()
    dst = out / "dst"
    # Siblings that are not provably a killed run's: another tool's, and a live run's.
    foreign = out / ".dst.stateglass-rewrite-foreign"
    foreign.mkdir()
    live = out / ".dst.stateglass-rewrite-live"
    live.mkdir()
    OwnerMark.of_this_process().write(str(live) + OWNER_SUFFIX)
    kept = {str(foreign), str(live), str(live) + OWNER_SUFFIX}
    args = ["rewrite", str(src), str(dst), "--partitions", "3", *edit, "--apply"]

    changes = _run_killed_at(args, out, None, False)
    complete = _shape(dst)
    assert changes > 20 and _is_checkpoint(dst)
    shutil.rmtree(dst)
    rng = random.Random(20)
    after_rename = 0
    for run in range(1, RUNS):
        kill_at = rng.randint(1, changes)
        _run_killed_at(args, out, kill_at, let_go=run % 2 == 0)
        assert tree_digest(src) == before
        if _is_checkpoint(dst):  # killed after the rename, before its owner file went
            assert _shape(dst) == complete
            after_rename += 1
            shutil.rmtree(dst)
        assert main(args) == 0, capsys.readouterr()
        assert _shape(dst) == complete
        assert set(temp_siblings(str(dst))) == kept, kill_at
        assert tree_digest(src) == before
        shutil.rmtree(dst)
    assert after_rename <= 2
