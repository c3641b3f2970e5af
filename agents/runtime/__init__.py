"""The agent runtime: the tool loop and what surrounds it, the run ledger, a team in one process.

Plain async code that knows nothing of Ray (or of litellm: it takes any `ModelClient`). An
`AgentRuntime` is composed of a `Reporter` (events, steps, span contents, results), a
`ModelCaller`, a `ToolRunner`, the agent's `Steering` (guardrails, hooks, step rules) and its
work: the `ToolLoop`, or a `RemoteExchange` for an agent reached over A2A.
"""

from agents.runtime.agent import AgentRuntime
from agents.runtime.ledger import RunLedger

__all__ = ["AgentRuntime", "RunLedger"]
