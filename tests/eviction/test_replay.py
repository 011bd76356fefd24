"""Replaying a partition's changes for the eviction audit: a list-state append keeps the key's
oldest element, a put replaces it, a delete drops it (the store reader's change types)."""

from __future__ import annotations

from collections.abc import Iterator

from stateglass.collectors.scan.eviction_audit import _replay


class ListStateReader:
    """A store that loads version 1 whole and holds versions 2 and 3 as changes."""

    def versions(self) -> list[int]:
        return [1, 2, 3]

    def change_versions(self) -> set[int]:
        return {2, 3}

    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        assert version == 1
        yield b"a", b"100"
        yield b"b", b"200"

    def changes(self, version: int) -> Iterator[tuple[str, bytes, bytes | None]]:
        if version == 2:
            yield "append", b"a", b"500"  # a newer element behind an older one
            yield "update", b"b", b"300"  # a put replaces the whole value
        else:
            yield "delete", b"a", None
            yield "append", b"c", b"50"


def event_time(key: bytes, value: bytes | None) -> tuple[bool, int | None]:
    return value is not None, int(value) if value is not None else None


def test_list_append_keeps_oldest_element_and_put_replaces() -> None:
    replayed = {v: dict(items) for v, items in _replay(ListStateReader(), event_time, [1, 2, 3])}  # type: ignore[arg-type]
    assert replayed[1] == {b"a": 100, b"b": 200}
    assert replayed[2] == {b"a": 100, b"b": 300}
    assert replayed[3] == {b"b": 300, b"c": 50}
