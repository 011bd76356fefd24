"""The compiled speedups under test, and the helpers their agreement tests share.

``compiled_speedups()`` is the one gate of those tests. A skip must mean "nothing to test",
never "the build went wrong": when ``make install`` had what it needs to build the extension
(its source beside setup.py and a C compiler), a missing or broken module fails the suite.
``STATEGLASS_PURE=1`` turns the compiled path off on purpose: the agreement tests then skip,
and ``test_speedups_build.py::test_the_switch_picks_the_path`` proves the readers run pure Python.
"""

from __future__ import annotations

import os
import shlex
import shutil
import struct
import sysconfig
from types import ModuleType
from typing import Any

import pytest
from hypothesis import strategies as st

from stateglass.parsers.errors import ParseError
from tests.conftest import ROOT

SOURCE = ROOT / "parsers" / "_speedups.c"
MODULE = "stateglass.parsers._speedups"

Outcome = tuple[str, Any]


def pure_requested() -> bool:
    """``STATEGLASS_PURE=1``: the compiled module refuses to import, by design."""
    return os.environ.get("STATEGLASS_PURE", "") not in ("", "0")


def compiler() -> str | None:
    """The C compiler setuptools would call (``$CC``, else the one Python was built with)."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or ""
    words = shlex.split(cc)
    return shutil.which(words[0]) if words else None


def speedups_expected() -> bool:
    """Whether ``pip install -e .`` had what it needs to build the extension: its source and
    a C compiler (setup.py marks it optional, so a build without a compiler still succeeds)."""
    return SOURCE.exists() and compiler() is not None


def compiled_speedups() -> ModuleType:
    """The compiled module; skips only when it was switched off or could not have been built,
    and fails when it should be there."""
    import importlib

    if pure_requested():
        pytest.skip(
            "STATEGLASS_PURE=1: the compiled speedups are off on purpose", allow_module_level=True
        )
    try:
        return importlib.import_module(MODULE)
    except ImportError as exc:
        if speedups_expected():
            pytest.fail(
                f"{MODULE} is missing although it should have been built ({SOURCE.name} is "
                f"here and {compiler()} compiles it): run `make install` again and read its "
                f"build output ({exc})",
                pytrace=False,
            )
        pytest.skip(f"{MODULE} not built: no C compiler found ({exc})", allow_module_level=True)


def outcome(fn: Any, *args: Any, **kwargs: Any) -> Outcome:
    """``("ok", result)`` or ``("error", (type, offset, message))``: what a call amounts to."""
    try:
        return "ok", fn(*args, **kwargs)
    except ParseError as exc:
        return "error", (type(exc), exc.offset, str(exc))


def _damaged(stream: bytes, data: st.DataObject) -> bytes:
    """A stream cut short, grown, or with a few bytes overwritten (sizes included)."""
    how = data.draw(st.sampled_from(["cut", "flip", "append", "size"]))
    if how == "cut" or not stream:
        return stream[: data.draw(st.integers(0, max(0, len(stream) - 1)))]
    if how == "append":
        return stream + data.draw(st.binary(min_size=1, max_size=8))
    out = bytearray(stream)
    if how == "size":
        # A size field set to something odd: -2, -1, huge, or a bit too long.
        at = data.draw(st.integers(0, max(0, len(out) - 4)))
        size = data.draw(st.sampled_from([-2, -1, 0, 7, 2**31 - 1, -(2**31)]))
        out[at : at + 4] = struct.pack(">i", size)
        return bytes(out)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(out) - 1))
        out[at] = data.draw(st.integers(0, 255))
    return bytes(out)


def _mutate_row(row: bytes, data: st.DataObject) -> bytes:
    """A row cut short, or with a few bytes set to values that break UTF-8 or sizes."""
    out = bytearray(row)
    if not out or data.draw(st.booleans()):
        return bytes(out[: data.draw(st.integers(0, len(out)))])
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(out) - 1))
        out[at] = data.draw(st.sampled_from([0, 1, 0x20, 0x7F, 0x80, 0xC3, 0xED, 0xFF]))
    return bytes(out)
