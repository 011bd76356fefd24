"""The dashboard's caches keep one result per question, for the newest version only.

A live Overview re-runs on every scan: with (question, version) keys each commit added one
more frame per question until the LRU limit, some eighty superseded copies of each load in a
soak over 20 checkpoints. A clock is passed in: no sleeping.
"""

from __future__ import annotations

from stateglass.app.dashboard.newest import NewestOnly


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_new_version_replaces_the_old_result_instead_of_adding_one() -> None:
    cache = NewestOnly(max_entries=256, ttl_s=600, clock=Clock())
    built: list[str] = []

    def build(question: str, version: int) -> str:
        built.append(f"{question}@{version}")
        return built[-1]

    for version in range(100):
        for question in ("overview", "sizes", "events"):
            for _ in range(3):  # three page runs per commit: built once
                got = cache.get(question, str(version), lambda q=question, v=version: build(q, v))
            assert got == f"{question}@{version}"
    assert len(built) == 300
    assert cache.versions() == {"overview": "99", "sizes": "99", "events": "99"}


def test_unused_results_expire_and_the_least_recent_go_over_the_limit() -> None:
    clock = Clock()
    cache = NewestOnly(max_entries=3, ttl_s=60, clock=clock)
    for q in "abcd":
        cache.get(q, "1", lambda q=q: q)
    assert set(cache.versions()) == {"b", "c", "d"}
    clock.now = 30
    cache.get("b", "1", lambda: "rebuilt")  # a hit: b is recent again, not rebuilt
    assert cache.get("b", "1", lambda: "rebuilt") == "b"
    clock.now = 70
    cache.get("e", "1", lambda: "e")  # c and d unused for 70 s: gone
    assert set(cache.versions()) == {"b", "e"}
    clock.now = 200
    assert cache.get("b", "1", lambda: "fresh") == "fresh"  # expired: built again
