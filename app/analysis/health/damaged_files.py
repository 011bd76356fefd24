"""Damaged files: every file in the ``problems`` table (unreadable, corrupt, empty, too new).

ERR when the file breaks something Spark needs to restart the query: the state version the next
batch loads (last committed batch + 1) in any partition, as Spark loads it (a bad snapshot that
its automatic repair skips breaks nothing), the query's ``metadata``, the newest
``offsets/`` or ``commits/`` entry, or a schema or operator-metadata file. WARN otherwise: an
older version or batch can no longer be read back or restarted from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from stateglass.app.analysis.chain_files import ChainFiles, bad_state_files
from stateglass.app.analysis.health.base import ERR, OK, WARN, Context, Finding
from stateglass.app.analysis.health.spark_load import load_version
from stateglass.app.analysis.health.versions import live_chain_files
from stateglass.collectors.checkpoints.load_rule import RepairSettings

# Findings listed one by one; beyond this many, the rest are summed up in one more finding.
MAX_LISTED = 20


@dataclass(frozen=True)
class _Damage:
    status: str
    path: str
    text: str
    chain: tuple[int, str, int] | None = None


class DamagedFiles:
    id = "damaged_files"
    title = "Damaged files"
    hint_err = (
        "A restart of the query fails on this file (Spark cannot read it either). Restore it "
        "from a backup or storage versioning; if it cannot be restored, restart from an older "
        "batch that is still readable (see the retention rule) or from a new checkpoint."
    )
    hint_warn = (
        "Older state or batches cannot be read back or restarted from; the query itself can "
        "restart. Find what damaged the file (disk, copy tool, lifecycle rule) before it "
        "reaches newer ones."
    )

    def check(self, ctx: Context) -> list[Finding]:
        bad = bad_state_files(ctx)
        if not bad:
            files = ctx.rows(
                "SELECT (SELECT count(*) FROM state_files WHERE checkpoint = $1 AND NOT purged) "
                "+ (SELECT count(*) FROM log_files WHERE checkpoint = $1)"
            )[0][0]
            return [ctx.finding(self, OK, f"0 damaged among {files} state and log files")]
        damages = self._judge(ctx, bad)
        damages.sort(key=lambda d: (d.status != ERR, d.path))
        stores = {(s.operator_id, s.store_name): s for s in ctx.stores}
        out = []
        for d in damages[:MAX_LISTED]:
            hint = self.hint_err if d.status == ERR else self.hint_warn
            store = stores.get(d.chain[:2]) if d.chain else None
            part = d.chain[2] if d.chain and store else None
            out.append(ctx.finding(self, d.status, d.text, hint, store, part))
        rest = damages[MAX_LISTED:]
        if rest:
            status = ERR if any(d.status == ERR for d in rest) else WARN
            out.append(
                ctx.finding(
                    self,
                    status,
                    f"{len(rest)} more damaged files (see the problems table / Query page)",
                    self.hint_err if status == ERR else self.hint_warn,
                )
            )
        return out

    def _judge(self, ctx: Context, bad: dict[str, list[tuple[str, str]]]) -> list[_Damage]:
        last = ctx.rows("SELECT max(batch_id) FROM batches WHERE checkpoint = ? AND committed")[0][
            0
        ]
        needed = last + 1 if last is not None else None
        where: dict[str, tuple[tuple[int, str, int], int | None, str]] = {}
        # SSTs have no version of their own: a damaged one breaks the versions whose zips
        # reference it (ChainFiles), so it is judged with its partition's chain.
        for op, store, part, version, kind, path in ctx.rows(
            "SELECT operator_id, store_name, partition_id, version, kind, path FROM state_files "
            "WHERE checkpoint = ? AND NOT purged AND (version IS NOT NULL OR kind = 'sst')"
        ):
            where[path] = ((op, store, part), version, kind)
        chains = live_chain_files(ctx)
        newest_log = self._newest_logs(ctx)
        providers = {(st.operator_id, st.store_name): st.provider for st in ctx.stores}
        repair = RepairSettings(
            ctx.config.spark.auto_snapshot_repair, ctx.config.spark.max_change_file_replay
        )
        out = []
        for path, found in bad.items():
            why = "; ".join(f"{kind}: {message}" for kind, message in found)
            name = os.path.relpath(path, ctx.checkpoint) if path.startswith("/") else path
            if path in where:
                chain, version, kind = where[path]
                files = chains.get(chain, ChainFiles())
                rocksdb = "rocksdb" in str(providers.get(chain[:2]) or "").lower()
                breaks = needed is not None and self._breaks(files, needed, repair, rocksdb)
                role = f"{kind} of version {version}" if version is not None else "RocksDB SST"
                text = f"{name} ({role}) cannot be read: {why}"
                if breaks:
                    text += f"; the next batch needs version {needed}"
                out.append(_Damage(ERR if breaks else WARN, path, text, chain))
                continue
            status, role = self._other(ctx, path, newest_log)
            out.append(_Damage(status, path, f"{name} ({role}) cannot be read: {why}"))
        return out

    @staticmethod
    def _breaks(files: ChainFiles, needed: int, repair: RepairSettings, rocksdb: bool) -> bool:
        """Whether the bad files make Spark fail to load ``needed`` when the files alone would
        not (its automatic snapshot repair skips a bad snapshot that older files bridge)."""
        whole = ChainFiles(files.change, files.full)
        return (
            load_version(whole, needed, repair, rocksdb).ok
            and not load_version(files, needed, repair, rocksdb).ok
        )

    @staticmethod
    def _newest_logs(ctx: Context) -> dict[str, str]:
        """``offsets``/``commits`` -> path of the newest entry of that log."""
        newest: dict[str, tuple[int, str]] = {}
        for (path,) in ctx.rows("SELECT path FROM log_files WHERE checkpoint = ?"):
            folder, _, name = path.rpartition("/")
            log = folder.rpartition("/")[2]
            if name.isdigit() and (log not in newest or int(name) > newest[log][0]):
                newest[log] = (int(name), path)
        return {log: p for log, (_, p) in newest.items()}

    @staticmethod
    def _other(ctx: Context, path: str, newest_log: dict[str, str]) -> tuple[str, str]:
        """``(status, what the file is)`` for a problem that is not a versioned state file."""
        if path == os.path.join(ctx.checkpoint, "metadata"):
            return ERR, "the query id Spark reads on restart"
        for log, newest in newest_log.items():
            if path == newest:
                return ERR, f"newest {log}/ entry, read on restart"
            if path.startswith(os.path.join(ctx.checkpoint, log) + "/"):
                return WARN, f"older {log}/ entry"
        parts = path.split("/")
        if "_metadata" in parts or "_stateSchema" in parts:
            return ERR, "state schema or operator metadata, checked on restart"
        return WARN, "not a state version file"
