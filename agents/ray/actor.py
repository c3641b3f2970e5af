"""Ray shells around the runtime: an async actor per agent replica, and their dispatcher.

Everything here is thin: the work happens in `agents.runtime.loop`, which does not know about Ray.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from agents.core.errors import describe_error
from agents.core.limits import TraceOptions
from agents.core.messages import AgentResult, Delegation, RunStatus
from agents.core.spec import AgentCard, AgentSpec, ModelSpec
from agents.models.base import tool_schema
from agents.models.client import LiteLLMClient, configure_litellm
from agents.models.safety import forbid_remote_models
from agents.ray.ledger_client import LedgerClient
from agents.runtime.loop import AgentRuntime
from agents.tools.delegate import build_tools
from agents.tools.mcp import McpServer, admit_mcp_tools, open_mcp_tools
from tracing import attributes as attr
from tracing import (
    configure_tracing,
    lost_agent_span,
    secret_values_from_env,
    secret_values_in,
)

__all__ = ["AgentActor", "RayDispatcher", "SystemRef"]


@dataclass(frozen=True)
class SystemRef:
    """How to find the actors of one agent system on Ray."""

    namespace: str
    prefix: str
    replicas: dict[str, int]
    max_restarts: dict[str, int] = field(default_factory=dict)

    def restartable(self, agent: str) -> bool:
        """Whether Ray restarts the agent's actors when they die (a delegation may be retried)."""
        return self.max_restarts.get(agent, 0) != 0

    def actor_name(self, agent: str, replica: int) -> str:
        """The Ray name of an agent's replica."""
        return f"{self.prefix}.{agent}.{replica}"

    @property
    def ledger_name(self) -> str:
        """The Ray name of the system's ledger actor."""
        return f"{self.prefix}.ledger"


class RayDispatcher:
    """Dispatches delegations to agent actors, spreading them round-robin over replicas.

    When the actor of an agent with restarts on dies during a delegation, the delegation is
    tried once more (on the restarted actor, or another replica), unless the failed attempt had
    started a tool that must run at most once: then the caller is told, and nothing is re-run.

    Args:
        system: where the actors are.
        ledger: the run ledger, which knows what each attempt started (no retries without it).
    """

    def __init__(self, system: SystemRef, ledger: LedgerClient | None = None) -> None:
        self._system = system
        self._ledger = ledger
        self._handles: dict[str, list[Any]] = {}
        self._turns = {name: itertools.cycle(range(n)) for name, n in system.replicas.items()}

    def _handle(self, target: str) -> tuple[str, Any]:
        replica = next(self._turns[target])
        name = self._system.actor_name(target, replica)
        handles = self._handles.setdefault(target, [None] * self._system.replicas[target])
        if handles[replica] is None:
            handles[replica] = ray.get_actor(name, namespace=self._system.namespace)
        return name, handles[replica]

    def submit(self, target: str, delegation: Delegation) -> tuple[str, ray.ObjectRef[AgentResult]]:
        """Start the delegation on a replica of `target`; the ref can be `ray.cancel`led."""
        name, handle = self._handle(target)
        return name, handle.invoke.remote(delegation)

    async def dispatch(
        self,
        target: str,
        delegation: Delegation,
        on_submit: Callable[[ray.ObjectRef[AgentResult]], None] | None = None,
    ) -> AgentResult:
        """Hand `delegation` to a replica of `target` and return its result."""
        ctx = delegation.context
        retried = False
        while True:
            attempt = uuid.uuid4().hex[:16]
            attempted = delegation.model_copy(
                update={"context": ctx.model_copy(update={"attempts": (*ctx.attempts, attempt)})}
            )
            name, lost = await self._attempt(target, attempted, on_submit)
            if not isinstance(lost, BaseException):
                return lost
            why = "retried once" if retried else "not retried"
            if not retried and self._system.restartable(target):
                started = await self._effects(ctx.run_id, attempt)
                if not started:
                    retried = True
                    await self._until_back(name, ctx.time_left())
                    continue
                why = f"not retried: {', '.join(sorted(set(started)))} had started (at most once)"
            elif not self._system.restartable(target):
                why = "no restarts configured"
            return AgentResult(
                agent=target,
                status=RunStatus.FAILED,
                call_id=delegation.call_id,
                actor=name,
                lost=True,
                error=f"agent actor {name} is unavailable ({describe_error(lost)}); {why}",
            )

    async def _attempt(
        self,
        target: str,
        delegation: Delegation,
        on_submit: Callable[[ray.ObjectRef[AgentResult]], None] | None,
    ) -> tuple[str, AgentResult | BaseException]:
        """One try: the result, or the error of an actor that died or cannot be found."""
        name = target
        submitted_ns = time.time_ns()
        try:
            name, ref = self.submit(target, delegation)
            if on_submit is not None:
                on_submit(ref)
            try:
                result: AgentResult = await ref
                return name, result
            except asyncio.CancelledError:
                # The caller stopped waiting (timeout, cancellation): stop the work too.
                ray.cancel(ref, recursive=True)
                raise
        except (RayActorError, ActorUnavailableError, ValueError) as exc:
            # A dead or missing actor is the caller's tool error, never a hung run.
            self._handles.pop(target, None)
            # Its own spans died with it: record what the caller saw, where it saw it.
            ctx = delegation.context
            lost_agent_span(
                target,
                name,
                ctx.run_id,
                ctx.chain,
                submitted_ns,
                type(exc).__name__,
                f"actor unavailable: {type(exc).__name__}",
            )
            return name, exc

    async def _until_back(self, name: str, limit_s: float) -> None:
        """Wait (at most `limit_s`) until the actor `name` answers again after a restart.

        Ray fails calls made while an actor is restarting rather than queueing them.
        """
        deadline = time.monotonic() + max(limit_s, 0.0)
        pause = 0.05
        while time.monotonic() < deadline:
            try:
                handle = ray.get_actor(name, namespace=self._system.namespace)
                await asyncio.wait_for(
                    handle.stats.remote(), max(deadline - time.monotonic(), 0.01)
                )
                return
            except (ActorUnavailableError, ValueError, TimeoutError):
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
            except RayActorError:
                return  # dead for good: the retry will say so

    async def _effects(self, run_id: str, attempt: str) -> list[str]:
        if self._ledger is None:
            return ["(unknown: no ledger)"]
        try:
            return await self._ledger.effects(run_id, attempt)
        except Exception:
            return ["(unknown: the ledger did not answer)"]


@ray.remote
class AgentActor:
    """One replica of one agent: an async actor, so delegations (even re-entrant ones) overlap."""

    def __init__(
        self,
        spec: AgentSpec,
        roster: list[AgentCard],
        delegates: list[str],
        system: SystemRef,
        replica: int,
        trace: TraceOptions,
        env: dict[str, str] | None = None,
        forbid_remote: bool = False,
    ) -> None:
        if forbid_remote:
            forbid_remote_models()
        self._name = system.actor_name(spec.name, replica)
        # The config's forwarded variables (provider keys), for litellm and tools to read.
        os.environ.update(env or {})
        # Those values and the model's own credentials never reach a span, a log line or a
        # result.
        secrets = secret_values_from_env(os.environ, env or ()) | secret_values_in(
            spec.model.params
        )
        context = ray.get_runtime_context()
        collector = configure_tracing(
            self._name,
            secrets,
            {attr.BATON_RAY_NODE_ID: context.get_node_id(), "host.name": socket.gethostname()},
        )
        self._inflight = 0
        self._invocations = 0
        self._spec = spec
        self._mcp_opened: asyncio.Task[None] | None = None
        self._mcp_servers: list[McpServer] = []
        self._tool_problems: list[str] = []
        ledger = LedgerClient(ray.get_actor(system.ledger_name, namespace=system.namespace))
        dispatcher = RayDispatcher(system, ledger)
        tools, hidden = build_tools(spec, roster, delegates, dispatcher, ledger)
        self._runtime = AgentRuntime(
            spec=spec,
            model=LiteLLMClient(spec.model),
            tools=tools,
            hidden_tools=hidden,
            ledger=ledger,
            events=ledger,
            span_source=collector,
            actor_id=self._name,
            trace_options=trace,
            redactor=collector.redactor,
            approvals=ledger,
        )

    async def _open_mcp(self) -> None:
        """Connect this replica's MCP servers, once (here or, after a restart, on first use).

        A server that fails is reported, and the agent works on without its tools.
        """
        if self._mcp_opened is None:
            self._mcp_opened = asyncio.get_running_loop().create_task(self._connect_mcp())
        await asyncio.shield(self._mcp_opened)

    async def _connect_mcp(self) -> None:
        if not self._spec.mcp:
            return
        self._mcp_servers, tools, problems = await open_mcp_tools(self._spec.mcp)
        for server, problem in problems.items():
            self._tool_problems.append(f"MCP server {server}: {problem}")
        usable, skipped = admit_mcp_tools(tools, self._runtime.tool_names())
        self._tool_problems += skipped
        self._runtime.add_tools(usable)

    async def ready(self) -> dict[str, Any]:
        """Warm litellm up and connect the agent's MCP servers.

        litellm's lazy imports are paid now rather than inside the first run.
        """
        await self._open_mcp()
        configure_litellm()
        warm = LiteLLMClient(ModelSpec())
        # With a tool, so that litellm's tool-call code paths are imported too.
        tool = tool_schema("warm_up", "warm up", {})
        reply = await warm.complete([{"role": "user", "content": "warm up"}], [tool])
        await warm.complete(
            [
                {"role": "user", "content": "warm up"},
                reply.as_message(),
                *[
                    {"role": "tool", "tool_call_id": c.id, "content": "ok"}
                    for c in reply.tool_calls
                ],
            ],
            [tool],
        )
        return self.stats()

    def stats(self) -> dict[str, Any]:
        """Where this replica runs and how busy it is."""
        context = ray.get_runtime_context()
        return {
            "actor": self._name,
            "pid": os.getpid(),
            "node_id": context.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
            "inflight": self._inflight,
            "invocations": self._invocations,
            "restarted": context.was_current_actor_reconstructed,
            "tool_problems": list(self._tool_problems)
            + [
                f"MCP server {server.spec.name}: tool {name} disabled: {why}"
                for server in self._mcp_servers
                for name, why in server.disabled.items()
            ],
        }

    async def invoke(self, delegation: Delegation) -> AgentResult:
        """Run one delegation on this replica's agent and return its result tree."""
        self._inflight += 1
        self._invocations += 1
        try:
            await self._open_mcp()
            return await self._runtime.invoke(delegation)
        finally:
            self._inflight -= 1

    async def close(self) -> None:
        """Close the MCP sessions (stdio servers stop) before the actor goes away."""
        await asyncio.gather(*(server.close() for server in self._mcp_servers))
