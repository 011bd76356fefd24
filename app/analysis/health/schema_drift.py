"""Schema drift: a state schema file that changed between scans or between versions."""

from __future__ import annotations

import re
from typing import Any

from stateglass.app.analysis.health.base import ERR, OK, WARN, Context, Finding

# Field names inside simple strings: "struct<k:bigint>" -> "struct<bigint>".
_FIELD_NAME = re.compile(r"([<,])[^:<>,]+:")


def _types(schema: str | None) -> str | None:
    return _FIELD_NAME.sub(r"\1", schema) if schema is not None else None


class SchemaDrift:
    id = "schema_drift"
    title = "Schema drift"
    hint_err = (
        "The key or value types of the state changed: rows written under the old schema do "
        "not decode under the new one, and a restart fails with StateSchemaNotCompatible (or "
        "reads garbage). Restore the original schema file, or run the changed query on a new "
        "checkpoint."
    )
    hint_warn = (
        "The schema file changed (field names, nullability, or a new schema version): Spark "
        "accepted it, but check the query change was intended; a later incompatible change "
        "fails the restart with StateSchemaNotCompatible."
    )

    def check(self, ctx: Context) -> list[Finding]:
        rows = ctx.rows(
            "SELECT operator_id, store_name, path, sha256, key_schema, value_schema, "
            "first_batch, first_seen FROM schema_files WHERE checkpoint = ? "
            "ORDER BY operator_id, store_name, first_seen, path"
        )
        by_store: dict[tuple[int, str], list[tuple[Any, ...]]] = {}
        for r in rows:
            by_store.setdefault((r[0], r[1]), []).append(r)
        stores = {(s.operator_id, s.store_name): s for s in ctx.stores}
        out: list[Finding] = []
        for key, items in by_store.items():
            store = stores.get(key)
            schemas = []
            for r in items:
                pair = (r[4], r[5])
                if r[4] is not None and pair not in schemas:
                    schemas.append(pair)
            digests_per_path: dict[str, set[str]] = {}
            for r in items:
                digests_per_path.setdefault(r[2], set()).add(r[3])
            rewritten = [p for p, d in digests_per_path.items() if len(d) > 1]
            if len(schemas) > 1:
                (k0, v0), (k1, v1) = schemas[0], schemas[-1]
                changed = []
                if k0 != k1:
                    changed.append(f"key {k0} -> {k1}")
                if v0 != v1:
                    changed.append(f"value {v0} -> {v1}")
                first_new = next(r for r in items if (r[4], r[5]) == schemas[-1])
                when = (
                    f"after batch {first_new[6]}"
                    if first_new[6] is not None
                    else "before the first commit"
                )
                text = (
                    f"{len(schemas)} schemas seen: {'; '.join(changed)} (new one first seen {when})"
                )
                types_changed = _types(k0) != _types(k1) or _types(v0) != _types(v1)
                status = ERR if types_changed else WARN
                hint = self.hint_err if types_changed else self.hint_warn
                out.append(ctx.finding(self, status, text, hint, store))
            elif rewritten:
                text = (
                    f"{len(rewritten)} schema file(s) rewritten with the same field types, "
                    f"e.g. {rewritten[0]}"
                )
                out.append(ctx.finding(self, WARN, text, self.hint_warn, store))
        if not out:
            files = len({r[2] for r in rows})
            text = (
                f"{files} schema file(s) of {len(by_store)} store(s) unchanged since first seen"
                if rows
                else "no schema files recorded"
            )
            out.append(ctx.finding(self, OK, text))
        return out
