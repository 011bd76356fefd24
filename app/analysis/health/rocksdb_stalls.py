"""RocksDB write stalls: RocksDB slowed or stopped writes because flushes or compactions could
not keep up (``rocksdbWriterStallLatencyMs``)."""

from __future__ import annotations

from stateglass.app.analysis.health import progress_rows as pr
from stateglass.app.analysis.health.base import ERR, OK, WARN, Context, Finding


class RocksdbStalls:
    id = "rocksdb_stalls"
    title = "RocksDB write stalls"
    hint = (
        "RocksDB held writes back while memtables flushed or level-0 files compacted. Give "
        "the state store more write buffers (spark.sql.streaming.stateStore.rocksdb."
        "writeBufferSizeMB, maxWriteBufferNumber), fewer keys per partition (more shuffle "
        "partitions), or faster local disks for the executors."
    )

    def check(self, ctx: Context) -> list[Finding]:
        cfg = ctx.config.rocksdb_stalls
        if not pr.has_progress(ctx):
            return pr.not_judged(ctx, self)
        by_op = pr.recent_state(
            ctx,
            "s.batch_id, s.rocksdb_write_stall_latency_ms",
            cfg.window,
            "s.rocksdb_write_stall_latency_ms IS NOT NULL",
        )
        if not by_op:
            return [ctx.finding(self, OK, "no RocksDB state store in the progress events")]
        out: list[Finding] = []
        oks: list[str] = []
        for (index, name), rows in by_op.items():
            stalled = [r for r in rows if r[1] > 0]
            total = sum(r[1] for r in rows)
            text = (
                f"operator {index} {name}: writes stalled {total:,} ms in {len(stalled)} of "
                f"{len(rows)} {pr.batches(rows)} (summed over partitions; WARN from "
                f"{cfg.warn_ms:,} ms"
                + (f", ERR from {cfg.err_ms:,} ms)" if cfg.err_ms > 0 else ")")
            )
            if cfg.err_ms > 0 and total >= cfg.err_ms:
                out.append(ctx.finding(self, ERR, text, self.hint))
            elif total >= cfg.warn_ms and total > 0:
                out.append(ctx.finding(self, WARN, text, self.hint))
            else:
                oks.append(text)
        if not out:
            out.append(ctx.finding(self, OK, "; ".join(oks)))
        return out
