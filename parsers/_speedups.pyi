"""Types of the optional compiled module built from ``_speedups.c`` (see that file)."""

from collections.abc import Iterable
from typing import Any

from typing_extensions import Buffer

def read_records(
    buf: bytes | memoryview, allow_deletes: bool, whole_values: bool = False, /
) -> list[tuple[bytes, bytes | None]] | None: ...
def read_record_keys(
    buf: bytes, allow_deletes: bool, /
) -> tuple[list[bytes], list[bytes]] | None: ...
def compile_plan(key_plan: tuple[Any, ...], value_plan: tuple[Any, ...], /) -> object: ...
def render_lines(
    plan: object, pairs: Iterable[Any], partition_id: int, skip: bool = False, /
) -> tuple[bytes, Any, int]: ...
def render_chain(
    plan: object, snapshot: bytes | None, deltas: list[bytes], partition_id: int, /
) -> tuple[list[bytes | tuple[bytes, bytes]], int] | None: ...
def binary_column(
    pairs: list[Any], index: int, strip_version: bool = False, /
) -> tuple[bytes, bytes] | None: ...
def chain_columns(
    snapshot: bytes | None,
    deltas: list[bytes],
    keys: bool,
    values: bool,
    value_sizes: tuple[int, ...] | None = None,
    /,
) -> (
    tuple[
        int,
        tuple[bytes, bytes] | None,
        tuple[bytes, bytes] | list[tuple[Buffer, Buffer | None, int, None]] | None,
    ]
    | None
): ...
def flat_struct(
    offsets: bytes | memoryview,
    data: bytes | memoryview,
    first: int,
    rows: int,
    sizes: tuple[int, ...],
    /,
) -> list[tuple[bytes, bytes | None, int, bytes | None]] | None: ...
def gather_bytes(
    data: bytes | memoryview, starts: bytes | memoryview, sizes: bytes | memoryview, /
) -> tuple[bytes, bytes] | None: ...
def lz4_stream(data: bytes | memoryview, budget: int, /) -> bytes | None: ...
def sst_data_blocks(
    table: bytes, index_block: bytes, format_version: int, checksum_type: int, budget: int, /
) -> tuple[list[bytes], int] | None: ...
def block_entries(block: bytes | memoryview, /) -> list[tuple[bytes, int, int]] | None: ...
def runs_columns(
    runs: list[list[bytes]],
    keys: bool,
    values: bool,
    strip_version: bool,
    value_sizes: tuple[int, ...] | None = None,
    /,
) -> (
    tuple[
        int,
        tuple[Buffer, Buffer] | None,
        tuple[Buffer, Buffer] | list[tuple[Buffer, Buffer | None, int, None]] | None,
    ]
    | None
): ...
def keep_freed_memory() -> bool: ...
def murmur3_bytes(buf: bytes, seed: int, /) -> int: ...
