"""A finished run's spans, gathered from every process that worked on it."""

from __future__ import annotations

import logging

from agents.core.messages import AgentResult, RunStatus
from agents.ray.ledger_client import LedgerClient
from orchestrator.service.live_trace import adopt_orphans
from tracing import SpanRecord, agent_span_counts

__all__ = ["SPANS_WAIT_S", "gather_spans"]

logger = logging.getLogger(__name__)

# How long a finished run waits for spans still on their way from agent actors.
SPANS_WAIT_S = 3.0


async def gather_spans(
    ledger: LedgerClient, here: list[SpanRecord], run_id: str, tree: AgentResult
) -> list[SpanRecord]:
    """Every span of the run, from every process.

    The orchestrator's own (`here`), the entry agent's (in its result), and those the sub-agents
    sent to the ledger before they returned (or were cancelled).
    """
    spans = here + tree.spans
    copies, tree.spans, tree.shipped_spans = tree.shipped_spans, [], []
    own, lost = agent_span_counts(spans)
    # Results made here (refused entry, cancellation) or by a caller for a dead actor
    # stand for no invocation that can send spans.
    expected = sum(1 for node in tree.walk() if node.actor is not None and not node.lost)
    shipped = tree.spans_sent  # the entry agent's spans sent as its steps ended
    if tree.status != RunStatus.CANCELLED and not lost:
        if own >= expected and not shipped:
            return spans  # a single agent: complete without asking the ledger
        # Every invocation ran in the entry's process: what it sent, it also returned.
        if all(node.actor == tree.actor for node in tree.walk()):
            complete = spans + copies
            if agent_span_counts(complete)[0] >= expected:
                return complete
    # Sent before the results were, but from other processes: wait (bounded) for them.
    kept, missing = await ledger.collect_spans(run_id, own, lost, expected, SPANS_WAIT_S, shipped)
    if missing:
        logger.warning("run %s: spans of %d invocations did not arrive", run_id, missing)
    if lost or agent_span_counts(kept)[1]:  # dead actors: hang what they sent under them
        adopt_orphans(spans + kept, (await ledger.snapshot(run_id))[1])
    return spans + kept
