"""The bounds every query of a SQL session runs under.

Example::

    SqlSession(["/data/checkpoints"], limits=SqlLimits(time_s=10, memory_bytes=256 << 20))
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from stateglass.collectors.errors import BadConfig

# A year: a limit past it (or infinite) is no limit, and DuckDB's own backstop holds its
# milliseconds in 64 bits.
MAX_TIME_S = 365 * 86400


@dataclass(frozen=True)
class SqlLimits:
    """Per query: wall time, DuckDB memory, spill space, and the threads decoding store
    partitions; per session: DuckDB threads and the bytes of decoded partitions kept for
    later queries.

    Rows handed to Python are outside DuckDB's ``memory_limit``: front ends stream them
    (:meth:`SqlSession.stream`) or cap them (``max_rows``).
    """

    time_s: float = 60.0
    memory_bytes: int = 512 << 20
    temp_bytes: int = 2 << 30
    # Python sources hold the GIL, so more DuckDB threads buy little and cost a core.
    threads: int = 1
    # Decoded partitions a session keeps for its next queries (0: none are kept).
    cache_bytes: int = 256 << 20
    # Store partitions a scan decodes at once, ahead of DuckDB; 1 decodes one after the
    # other. On local disk a partition is CPU (the compiled decoders let go of the GIL): one
    # per core, at most 4. On an object store it mostly waits, a request after the other at
    # tens of milliseconds each, so more overlap (docs/benchmarks.md: "sql on S3").
    decoders: int = field(default_factory=lambda: min(4, os.cpu_count() or 1))
    remote_decoders: int = 16

    def __post_init__(self) -> None:
        if not 0 < self.time_s <= MAX_TIME_S:
            raise BadConfig(
                "time limit",
                f"must be more than 0 and at most {MAX_TIME_S} seconds, got {self.time_s}",
            )
        if self.memory_bytes < 16 << 20:
            raise BadConfig("memory limit", f"must be at least 16MiB, got {self.memory_bytes}")
        if self.temp_bytes < 0:
            raise BadConfig("temp limit", f"must be 0 or more bytes, got {self.temp_bytes}")
        if self.cache_bytes < 0:
            raise BadConfig("cache limit", f"must be 0 or more bytes, got {self.cache_bytes}")
        if self.threads < 1:
            raise BadConfig("threads", f"must be 1 or more, got {self.threads}")
        if min(self.decoders, self.remote_decoders) < 1:
            raise BadConfig(
                "jobs", f"must be 1 or more, got {min(self.decoders, self.remote_decoders)}"
            )
