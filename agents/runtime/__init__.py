"""The tool loop and what it runs under: the run ledger's protocols, and a team in one process.

Plain async code that knows nothing of Ray (or of litellm: it takes any `ModelClient`).
"""

from agents.core.ports import Approvals, EventSink, Ledger, SpanSource
from agents.runtime.ledger import RunLedger
from agents.runtime.loop import AgentRuntime

__all__ = [
    "AgentRuntime",
    "Approvals",
    "EventSink",
    "Ledger",
    "RunLedger",
    "SpanSource",
]
