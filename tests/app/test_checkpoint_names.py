"""Names that tell checkpoints apart: examples and properties."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stateglass.app.checkpoint_names import distinct_names

COMPONENT = st.sampled_from(["a", "b", "orders", "ckpts", "…", "v1", "x y", ""])
PATH = st.builds(
    lambda absolute, parts, trailing: (
        ("/" if absolute else "") + "/".join(parts) + ("/" if trailing else "")
    ),
    st.booleans(),
    st.lists(COMPONENT, min_size=0, max_size=6),
    st.booleans(),
)


def test_a_long_common_prefix_is_dropped() -> None:
    prefix = "/mnt/lake/prod/team/streaming/ckpts"
    paths = [f"{prefix}/eu/blockchain-dedup", f"{prefix}/us/blockchain-dedup", f"{prefix}/x"]
    assert distinct_names(paths) == {
        paths[0]: "eu/blockchain-dedup",
        paths[1]: "us/blockchain-dedup",
        paths[2]: "x",
    }


def test_a_short_path_keeps_its_leading_slash() -> None:
    names = distinct_names(["/a/orders", "/orders", "/b/users"])
    assert names == {"/a/orders": "/a/orders", "/orders": "/orders", "/b/users": "users"}


# Slow to generate on a busy machine, not slow to check: no health check on the pace.
RELAXED = settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)


@RELAXED
@given(st.lists(PATH, unique=True, max_size=8))
def test_unique_paths_give_unique_names(paths: list[str]) -> None:
    names = distinct_names(paths)
    assert set(names) == set(paths)
    assert len(set(names.values())) == len(paths)


@RELAXED
@given(st.lists(PATH, unique=True, max_size=8))
def test_each_name_is_a_tail_of_its_path(paths: list[str]) -> None:
    for path, name in distinct_names(paths).items():
        assert name == path or path.rstrip(os.sep).endswith(os.sep + name)
