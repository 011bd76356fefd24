"""The suite's own layout: every test folder is a package, so none can shadow a library.

pytest's default import mode puts the first folder above a test module that has no
``__init__.py`` on ``sys.path``. A folder ``tests/packaging`` without one made ``import
packaging`` find the test folder instead of the library (streamlit broke on it). With every
folder a package, only the repository itself goes on ``sys.path`` and a test folder is
always ``tests.<name>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import ROOT

TESTS = ROOT / "tests"


def _test_folders() -> list[Path]:
    """Folders holding test modules, conftests or helpers: everything pytest may import."""
    folders = {p.parent for p in TESTS.rglob("*.py") if "data" not in p.relative_to(TESTS).parts}
    return sorted(folders)


def test_every_test_folder_is_a_package() -> None:
    missing = {
        str(level.relative_to(ROOT))
        for folder in _test_folders()
        for level in (folder, *folder.parents)
        if (level == TESTS or TESTS in level.parents) and not (level / "__init__.py").exists()
    }
    assert missing == set()


def test_no_test_folder_is_on_sys_path() -> None:
    on_path = {Path(p).resolve() for p in sys.path if p}
    assert not [p for p in on_path if p == TESTS or TESTS in p.parents]
    assert ROOT in on_path  # tests.* helpers import through the repository root


def test_a_library_named_like_a_test_folder_is_the_library() -> None:
    import packaging

    assert TESTS not in Path(packaging.__file__).resolve().parents
