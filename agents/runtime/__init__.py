"""The agent runtime: an agent's invocations, their tool loop and what surrounds it.

Plain async code that knows nothing of Ray (or of litellm: it takes any `ModelClient`). An
`AgentRuntime` is composed of a `Reporter` (events, steps, span contents, results), a
`ModelCaller`, a `ToolRunner` (with `People`, its waits for a person), the agent's `Steering`
(guardrails, hooks, step rules) and its work: the `ToolLoop`, or a `RemoteExchange` for an agent
reached over A2A. `Assembly` puts one together; `LocalTeam` runs a team in one process.
"""

from agents.runtime.agent import AgentRuntime
from agents.runtime.assembly import Assembly

__all__ = ["AgentRuntime", "Assembly"]
