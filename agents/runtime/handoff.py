"""Handing a delegation to an agent of this process, traced as if it crossed processes.

Used by `LocalTeam` (a whole team in one process) and by agent hosts on Ray (agents that share
an actor). Light on purpose: the orchestrator imports it and must not load litellm.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from opentelemetry import context as otel_context

from agents.core.messages import AgentResult, Delegation

__all__ = ["invoke_here"]


async def invoke_here(
    invoke: Callable[[Delegation], Awaitable[AgentResult]], delegation: Delegation
) -> AgentResult:
    """Run `delegation` on an agent of this process, in a fresh context (as across actors).

    Only the W3C trace context inside the delegation links the callee's spans to the caller's,
    so a delegation in one process is traced exactly like one between processes.
    """
    token = otel_context.attach(otel_context.Context())
    try:
        return await invoke(delegation)
    finally:
        otel_context.detach(token)
