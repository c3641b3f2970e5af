"""The agent host: one async Ray actor running one or more agents of a system.

Everything here is thin: the work happens in `agents.runtime.loop`, which does not know about Ray.
Agents in the same host share its process, its litellm, its span collector and its ledger client;
delegations between them never leave the process (`agents.ray.dispatch.RayDispatcher`).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import socket
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ray

from agents.core.gc_policy import settle_after_start
from agents.core.imports import on_import_path
from agents.core.limits import TraceOptions
from agents.core.messages import AgentResult, Delegation
from agents.core.spec import AgentCard, AgentSpec, ModelSpec
from agents.models import safety
from agents.models.base import tool_schema
from agents.ray.dispatch import RayDispatcher, SystemRef
from agents.ray.gate_actor import RayGates
from agents.ray.ledger_client import LedgerClient
from agents.ray.wire import HostCall, HostReply, seal, unseal
from agents.runtime.agent import AgentRuntime
from agents.runtime.assembly import Assembly
from tracing import attributes as attr
from tracing import (
    configure_tracing,
    secret_values_from_env,
)

if TYPE_CHECKING:
    from agents.models.client import LiteLLMClient
    from agents.tools.mcp import McpServer

__all__ = ["AgentHost"]

# Cancellations of calls that had not come yet (`AgentHost.cancel`): a few, for a moment.
_EARLY_CANCELS = 1024

# Calls about the host rather than work for it (`stats`, `cancel`), in a group of their own:
# not held behind the delegations that fill an agent's `max_concurrency`. Ray runs each group
# of an async actor on its own thread and event loop, so these only read the host's state or
# hand the work to the delegations' loop.
_CONTROL = "control"
# The supervisor's call parked in the host (`parked`), apart from both: it waits, it never works.
_WATCH = "watch"


@dataclass
class _Hosted:
    """One agent in a host: its runtime, MCP servers, and how busy it is."""

    spec: AgentSpec
    runtime: AgentRuntime
    inflight: int = 0
    invocations: int = 0
    mcp_opened: asyncio.Task[None] | None = None
    mcp_servers: list[McpServer] = field(default_factory=list)
    tool_problems: list[str] = field(default_factory=list)

    async def open_mcp(self) -> None:
        """Connect the agent's MCP servers, once (at start or, after a restart, on first use).

        A server that fails is reported, and the agent works on without its tools.
        """
        if self.mcp_opened is None:
            self.mcp_opened = asyncio.get_running_loop().create_task(self._connect_mcp())
        await asyncio.shield(self.mcp_opened)

    async def _connect_mcp(self) -> None:
        if not self.spec.mcp:
            return
        # Imported here: the MCP client costs a host 0.6 s of start-up, paid only when used.
        from agents.tools.mcp import admit_mcp_tools, open_mcp_tools

        self.mcp_servers, tools, problems = await open_mcp_tools(self.spec.mcp)
        for server, problem in problems.items():
            self.tool_problems.append(f"MCP server {server}: {problem}")
        usable, skipped = admit_mcp_tools(tools, self.runtime.tool_names())
        self.tool_problems += skipped
        self.runtime.add_tools(usable)

    def problems(self) -> list[str]:
        """MCP servers it could not use, and tools it disabled or skipped.

        Read from the host's control thread (`AgentHost.stats`): each collection is copied in
        one step, which the GIL keeps whole while the delegations' thread changes it.
        """
        return list(self.tool_problems) + [
            f"MCP server {server.spec.name}: tool {name} disabled: {why}"
            for server in tuple(self.mcp_servers)
            for name, why in tuple(server.disabled.items())
        ]


@ray.remote(concurrency_groups={_CONTROL: 4, _WATCH: 4})  # type: ignore[call-overload]
class AgentHost:
    """One replica of a host: an async actor, so delegations (even re-entrant ones) overlap.

    Args:
        specs: the agents it runs.
        roster: every agent of the system, as delegation tools describe them.
        delegates: whom each hosted agent may delegate to.
        system: where the system's other actors are.
        ledger_handles: the system's ledger, one actor per shard.
        replica: which replica of its host this is.
        trace: what spans record.
        env: the config's forwarded variables; their values are secrets.
        forbid_remote_models: the agents may call only built-in models and servers on loopback.
        gates: the cluster's provider gates, when the system has any.
        code_path: folders put on its import path (the team file's).
    """

    def __init__(
        self,
        specs: list[AgentSpec],
        roster: list[AgentCard],
        delegates: Mapping[str, list[str]],
        system: SystemRef,
        ledger_handles: tuple[Any, ...],
        replica: int,
        trace: TraceOptions,
        env: dict[str, str] | None = None,
        forbid_remote_models: bool = False,
        gates: RayGates | None = None,
        code_path: tuple[str, ...] = (),
    ) -> None:
        on_import_path(*code_path)  # before any of the team's own modules is imported
        if forbid_remote_models:
            safety.forbid_remote_models()
        # Imported here, not at the top: the driver imports this module to create hosts, and
        # litellm costs it 2.4 s and about 150 MB that only agents need. With the collector
        # paused: the import makes a great many objects and no garbage, and the collector's
        # passes over them were a tenth of its CPU.
        collecting = gc.isenabled()
        gc.disable()
        try:
            from agents.models.client import LiteLLMClient
        finally:
            if collecting:
                gc.enable()

        self._client: type[LiteLLMClient] = LiteLLMClient
        self._name = system.actor_name(specs[0].name, replica)
        self._restarted: bool | None = None  # asked of Ray once (see `_was_restarted`)
        # The config's forwarded variables (provider keys), for litellm and tools to read.
        os.environ.update(env or {})
        # Those values and the models' own credentials never reach a span, a log line or a
        # result.
        secrets = secret_values_from_env(os.environ, env or ())
        for spec in specs:
            secrets |= spec.credentials(os.environ)
        context = ray.get_runtime_context()
        collector = configure_tracing(
            self._name,
            secrets,
            {attr.BATON_RAY_NODE_ID: context.get_node_id(), "host.name": socket.gethostname()},
        )
        self._ledger = ledger = LedgerClient(ledger_handles)
        self._loop: asyncio.AbstractEventLoop | None = None  # the delegations' (`invoke`)
        self._calls: dict[str, asyncio.Task[Any]] = {}  # by delegation attempt
        self._early: OrderedDict[str, None] = OrderedDict()  # attempts cancelled before they came
        # Delegations between the agents hosted here are awaited in this process (`_run`).
        here = {spec.name: functools.partial(self._run, spec.name) for spec in specs}
        self._dispatcher = dispatcher = RayDispatcher(system, ledger, local=here, hand_back=True)
        assembly = Assembly(
            roster,
            delegates,
            dispatcher,
            LiteLLMClient,
            record=ledger,
            memory=ledger,  # (through the ledger: on the store's node, with its connections)
            gates=gates,
            gate_specs=gates.specs if gates else (),
            span_source=collector,
            actor_id=self._name,
            trace=trace,
            redactor=collector.redactor,
        )
        # (A remote agent, `a2a:`, is one whose work is a message to another system.)
        self._agents = {spec.name: _Hosted(spec, assembly.agent(spec)) for spec in specs}

    async def ready(self) -> dict[str, Any]:
        """Connect the agents' MCP servers and warm litellm up, once for all of them.

        litellm's lazy imports are paid now rather than inside the first run.
        """
        self._loop = asyncio.get_running_loop()
        self._dispatcher.follow_scaling()  # (autoscaled hosts' replicas come and go)
        await asyncio.gather(*(hosted.open_mcp() for hosted in self._agents.values()))
        # (litellm itself was configured when the agents' clients were made.)
        warm = self._client(ModelSpec())
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
        # What is alive now (modules, litellm's tables) lives as long as the process.
        settle_after_start()
        return self._stats()

    @ray.method(concurrency_group=_CONTROL)
    def stats(self) -> dict[str, Any]:
        """Where this replica runs, and for each agent it hosts how busy it is."""
        return self._stats()

    def _stats(self) -> dict[str, Any]:
        context = ray.get_runtime_context()
        return {
            "actor": self._name,
            "pid": os.getpid(),
            "node_id": context.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
            "restarted": self._was_restarted(context),
            "agents": {
                name: {
                    "inflight": hosted.inflight,
                    "invocations": hosted.invocations,
                    "tool_problems": hosted.problems(),
                }
                for name, hosted in self._agents.items()
            },
        }

    @ray.method(concurrency_group=_WATCH)
    async def parked(self, seconds: float) -> None:
        """Return after `seconds`, or fail the moment this process dies.

        How the supervisor (`agents.ray.supervisor`) learns of a death without polling.
        """
        await asyncio.sleep(seconds)

    def _was_restarted(self, context: Any) -> bool:
        # A restart is a new process, so the answer holds for this one's life; Ray's property
        # asks the GCS for the actor's record each time it is read.
        if self._restarted is None:
            self._restarted = bool(context.was_current_actor_reconstructed)
        return self._restarted

    async def invoke(self, sealed: bytes) -> bytes:
        """Run one delegation on a hosted agent and reply with its result tree.

        Both sealed (`agents.ray.wire`): the call is a `HostCall` (what its fields ask of this
        host is documented there), the reply a `HostReply`.
        """
        self._loop = asyncio.get_running_loop()
        call = unseal(sealed, HostCall)
        delegation = call.delegation
        run_id, attempt = delegation.context.run_id, delegation.context.attempt
        if attempt in self._early:
            del self._early[attempt]
            raise asyncio.CancelledError  # the caller sees it as Ray's TaskCancelledError
        outbox = self._ledger.outbox
        if call.carried is not None:
            outbox.take_over(call.carried)
        if call.opening is not None:
            outbox.emit(run_id, call.opening)
        task = asyncio.current_task()
        if attempt and task is not None:
            self._calls[attempt] = task
        try:
            result = await self._run(call.agent, delegation)
        finally:
            self._calls.pop(attempt, None)
        # What it queued for the run goes to the ledger before the reply reaches the caller, or
        # with the reply, for the caller's process to send (one ledger call fewer).
        handover = outbox.hand_over(run_id) if call.hand_back else None
        if not call.hand_back:
            outbox.flush(run_id)
        return seal(HostReply.of(result, handover, outbox.sent(run_id)))

    @ray.method(concurrency_group=_CONTROL)
    async def cancel(self, attempt: str) -> None:
        """Stop the call of this delegation attempt (or refuse it when it comes).

        Its delegations stop with it (their callers' cancellation reaches them). Besides
        `ray.cancel`, which drops a cancellation that reaches an async actor before the call's
        coroutine is queued there (ray-project/ray#52628), so that the call runs to its end.
        """
        loop = self._loop
        if loop is None:  # before `ready` and any call: nothing runs on that loop yet
            self._cancel(attempt)
        else:  # on the delegations' loop, where `invoke` reads and writes the same state
            loop.call_soon_threadsafe(self._cancel, attempt)

    def _cancel(self, attempt: str) -> None:
        task = self._calls.get(attempt)
        if task is not None:
            task.cancel()
            return
        self._early[attempt] = None
        while len(self._early) > _EARLY_CANCELS:
            self._early.popitem(last=False)

    async def _run(self, agent: str, delegation: Delegation) -> AgentResult:
        # Not flushed at its end: whoever called it (`invoke`, or an agent of this host) sends
        # what is queued, or hands it on.
        hosted = self._agents[agent]
        hosted.inflight += 1
        hosted.invocations += 1
        try:
            await hosted.open_mcp()
            return await hosted.runtime.invoke(delegation, flush=False)
        finally:
            hosted.inflight -= 1

    async def close(self) -> None:
        """Close the MCP sessions (stdio servers stop) before the actor goes away."""
        await asyncio.gather(
            *(server.close() for hosted in self._agents.values() for server in hosted.mcp_servers)
        )
