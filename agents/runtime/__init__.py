"""The tool loop and what it runs under: the delegation guard and the run ledger's protocols.
Plain async code that knows nothing of Ray (or of litellm: it takes any `ModelClient`)."""

from agents.runtime.guard import check_delegation
from agents.runtime.ledger import Approvals, EventSink, Ledger, RunLedger, SpanSource
from agents.runtime.loop import AgentRuntime

__all__ = [
    "AgentRuntime",
    "Approvals",
    "EventSink",
    "Ledger",
    "RunLedger",
    "SpanSource",
    "check_delegation",
]
