"""Small text helpers shared by the collectors and the CLI (no heavy imports)."""

from __future__ import annotations

from collections.abc import Iterable


def ranges(values: Iterable[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``1..3, 5``."""
    out: list[str] = []
    items = sorted(values)
    if not items:
        return "none"
    start = prev = items[0]
    for v in items[1:]:
        if v == prev + 1:
            prev = v
            continue
        out.append(f"{start}..{prev}" if prev != start else str(start))
        start = prev = v
    out.append(f"{start}..{prev}" if prev != start else str(start))
    return ", ".join(out)
