"""``stateglass compat``: will the changed query restart on the old checkpoint?

``facts`` reads what a restart check needs from a checkpoint (I/O); ``rules`` replays Spark's
checks on two such readings (pure); ``types`` holds Spark's schema rules. See docs/compat.md.

Example::

    verdict = compare("/cp/orders", "/tmp/orders-staging")
    print(verdict.restarts, verdict.error_class)
"""

from __future__ import annotations

from stateglass.app.analysis.compat.facts import CheckpointFacts, read_facts
from stateglass.app.analysis.compat.rules import Check, Verdict, predict
from stateglass.collectors.checkpoints.checkpoint import Checkpoint


def compare(old: str, new: str) -> tuple[CheckpointFacts, CheckpointFacts, Verdict]:
    """Read both checkpoints (``CheckpointError`` on bad input) and predict the restart."""
    old_facts = read_facts(Checkpoint.open(old))
    new_facts = read_facts(Checkpoint.open(new))
    return old_facts, new_facts, predict(old_facts, new_facts)


__all__ = ["Check", "CheckpointFacts", "Verdict", "compare", "predict", "read_facts"]
