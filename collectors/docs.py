"""Where the documentation the messages point to lives on this machine.

A message that says "see docs/spark-engine.md" helps only in a clone of the repository; an
install from the wheel carries the same files as ``stateglass.docs`` data, so messages name
the installed copy instead.

Example::

    raise EngineError(master, f"no executor joined; see {doc_path('spark-engine.md')}")
"""

from __future__ import annotations

import importlib.resources
from functools import cache


@cache
def doc_path(name: str) -> str:
    """The path of ``docs/NAME`` as installed, or ``docs/NAME`` when it cannot be found."""
    try:
        path = importlib.resources.files("stateglass.docs") / name
        if path.is_file():
            return str(path)
    except (ModuleNotFoundError, NotADirectoryError):
        pass
    return f"docs/{name}"
