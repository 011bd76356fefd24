"""Read a rewrite's destination back with StateGlass's own readers and compare.

Every store partition must hold exactly the rows meant for it: the same multiset of
``(key, value)``, so a key in the wrong partition is a difference too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from stateglass.collectors.errors import SelfCheckFailed
from stateglass.collectors.fs import LOCAL
from stateglass.collectors.rewrite import neutralizer
from stateglass.collectors.rewrite.base import WriteTarget
from stateglass.collectors.stores import StoreContext, open_store

Rows = Sequence[tuple[bytes, bytes]]


def check_partition(target: WriteTarget, provider: str, meant: Rows) -> None:
    """Raise :class:`SelfCheckFailed` unless ``target``'s store, read back at its version
    with ``provider``'s reader and put in the neutral form, holds exactly ``meant``."""
    ctx = StoreContext(
        LOCAL, target.store_dir, codec=target.codec, row_checksum=target.row_checksum
    )
    stored = open_store(ctx, provider).load(target.version)
    neutral = neutralizer(provider)(
        target.store, stored, row_checksum=target.row_checksum, where=target.store_dir
    )
    found = Counter(neutral)
    want = Counter(meant)
    if found != want:
        missing = sum((want - found).values())
        extra = sum((found - want).values())
        raise SelfCheckFailed(
            target.store_dir,
            f"read back at version {target.version}, {missing} row(s) meant are missing and "
            f"{extra} row(s) were not meant; the destination was removed",
        )
