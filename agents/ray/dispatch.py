"""Handing delegations to agents: in this process when the target lives here, else over Ray.

A host (`agents.ray.host.AgentHost`) runs several agents in one process; a delegation between
two of them is a plain await through the same guard, spans and events as one across actors.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from agents.core.errors import describe_error
from agents.core.events import Event, HostRestarted
from agents.core.messages import AgentResult, Delegation, RunStatus
from agents.ray.handover import Handover
from agents.ray.ledger_client import LedgerClient
from agents.ray.supervisor import HostState
from agents.ray.wire import Arrived, HostCall, HostReply, open_tree, seal, unseal
from agents.runtime.handoff import invoke_here
from tracing import host_came_back, host_wait_span, lost_agent_span

__all__ = ["RayDispatcher", "SystemRef"]

# A delegation whose call was lost on its way to or from an agent actor that still answers (Ray's
# `ActorUnavailableError`: a network fault, not a death) is made again up to this many times.
TRANSIENT_RETRIES = 5
# How long an actor has to answer before its lost call counts as its death instead.
ALIVE_WAIT_S = 5.0


@dataclass(frozen=True)
class SystemRef:
    """How to find the actors of one agent system on Ray.

    `replicas` and `max_restarts` are per agent (those of the host it runs in); `hosts` names
    each agent's host (an agent missing from it has actors of its own, named after it).
    `supervised`: a host that dies is created again by the system's supervisor
    (`agents.ray.supervisor`), which says when it is back. `autoscaled`: the replicas of some
    host follow the load (`agents.ray.scaler`); `replicas` are those it starts with.
    """

    namespace: str
    prefix: str
    replicas: dict[str, int]
    max_restarts: dict[str, int] = field(default_factory=dict)
    hosts: dict[str, str] = field(default_factory=dict)
    supervised: bool = False
    # Some host's replicas follow the load: the system's scaler says which to choose from.
    autoscaled: bool = False

    def restartable(self, agent: str) -> bool:
        """Whether the agent's actors come back when they die (a delegation may be retried).

        The supervisor creates them again, or Ray restarts them.
        """
        return self.supervised or self.max_restarts.get(agent, 0) != 0

    def host_of(self, agent: str) -> str:
        """The host the agent runs in."""
        return self.hosts.get(agent, agent)

    def actor_name(self, agent: str, replica: int) -> str:
        """The Ray name of the actor running replica `replica` of the agent's host."""
        return self.host_actor_name(self.host_of(agent), replica)

    def host_actor_name(self, host: str, replica: int) -> str:
        """The Ray name of replica `replica` of the host `host`."""
        return f"{self.prefix}.{host}.{replica}"

    def ledger_shard_name(self, shard: int) -> str:
        """The Ray name of a shard of the system's ledger (the first keeps the ledger's name)."""
        return f"{self.prefix}.ledger" if shard == 0 else f"{self.prefix}.ledger.{shard}"

    @property
    def supervisor_name(self) -> str:
        """The Ray name of the system's host supervisor (when `supervised`)."""
        return f"{self.prefix}.supervisor"

    @property
    def scaler_name(self) -> str:
        """The Ray name of the system's replica scaler (when `autoscaled`)."""
        return f"{self.prefix}.scaler"


class RayDispatcher:
    """Dispatches delegations to agent actors, spreading them round-robin over replicas.

    When the actor of an agent with restarts on dies during a delegation, the delegation is
    tried once more (on the restarted actor, or another replica). With a step log, the retry
    resumes from the invocation's recorded steps; without one, it is made only if the failed
    attempt had started no tool that must run at most once (else the caller is told).

    A target that runs in this very process (`local`) is awaited directly: no Ray call, no
    pickling, and nothing to retry (if this process dies, so does the caller).

    Args:
        system: where the actors are.
        ledger: the run ledger, which knows what each attempt started (no retries without it).
        local: how to invoke each agent hosted in this process, by agent.
        hand_back: this process is an agent's (not the orchestrator's): a callee in another
            process hands what it queued for the run back with its result, and it is sent to
            the ledger from here (`Outbox.take_over`) instead of by a call of its own.
    """

    def __init__(
        self,
        system: SystemRef,
        ledger: LedgerClient | None = None,
        local: Mapping[str, Callable[[Delegation], Awaitable[AgentResult]]] | None = None,
        hand_back: bool = False,
    ) -> None:
        self._system = system
        self._ledger = ledger
        self._local = local or {}
        self._hand_back = hand_back and ledger is not None
        self._handles: dict[tuple[str, int], Any] = {}
        # Calls in flight: their actor and delegation attempt, for `cancel`.
        self._calls: dict[ray.ObjectRef[bytes], tuple[Any, str]] = {}
        # The replicas each agent's delegations go to, in turn (the scaler changes them).
        self._choice = {name: list(range(n)) for name, n in system.replicas.items()}
        self._turns: defaultdict[str, itertools.count[int]] = defaultdict(itertools.count)
        self._following: asyncio.Task[None] | None = None
        # Agents a call found a host of left down in a crash loop, and why (see `left_down`).
        self.left_down: dict[str, str] = {}

    def _handle(self, target: str, replica: int) -> Any:
        handle = self._handles.get((target, replica))
        if handle is None:
            name = self._system.actor_name(target, replica)
            handle = ray.get_actor(name, namespace=self._system.namespace)
            self._handles[(target, replica)] = handle
        return handle

    def _next(self, target: str) -> int:
        """The replica of `target` whose turn it is."""
        choice = self._choice[target]
        return choice[next(self._turns[target]) % len(choice)]

    def choose_from(self, host: str, replicas: list[int]) -> None:
        """Send the delegations of the agents of `host` to these replicas from now on."""
        for agent in self._choice:
            if self._system.host_of(agent) == host and replicas:
                self._choice[agent] = sorted(replicas)

    def follow_scaling(self) -> None:
        """Keep the replicas to choose from as the system's scaler says (in this event loop).

        A call parked in the scaler returns when they change: no polling. Nothing to follow in
        a system without autoscaled hosts.
        """
        if self._system.autoscaled and self._following is None:
            self._following = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        known = 0
        while self._following is not None:
            try:
                scaler = ray.get_actor(self._system.scaler_name, namespace=self._system.namespace)
                while True:
                    known, replicas = await scaler.membership.remote(known)
                    for host, chosen in replicas.items():
                        self.choose_from(host, chosen)
            except asyncio.CancelledError:
                raise
            except Exception:  # the scaler is restarting, or not started yet: ask again
                await asyncio.sleep(1.0)

    def stop_following(self) -> None:
        """Stop following the scaler (the process is leaving Ray); from any thread."""
        task, self._following = self._following, None
        if task is not None and not task.get_loop().is_closed():  # (else it is gone with it)
            task.get_loop().call_soon_threadsafe(task.cancel)

    def submit(
        self,
        target: str,
        delegation: Delegation,
        opening: Event | None = None,
        carried: Handover | None = None,
        replica: int | None = None,
    ) -> ray.ObjectRef[bytes]:
        """Start the delegation on a replica of `target`; `cancel` stops it until it returns.

        `replica`: which one (default: the next in turn). `carried`: what this process had
        queued for the run, for the callee's to send.
        """
        if replica is None:
            replica = self._next(target)
        handle = self._handle(target, replica)
        call = HostCall(target, delegation, opening, self._hand_back, carried)
        ref: ray.ObjectRef[bytes] = handle.invoke.remote(seal(call))
        if delegation.context.attempt:  # the host knows its call by it (`AgentHost.cancel`)
            self._calls[ref] = (handle, delegation.context.attempt)
        return ref

    def cancel(self, ref: ray.ObjectRef[bytes]) -> None:
        """Stop a call `submit` made, and the delegations it made in turn.

        Ray's own cancellation is not enough: it drops one that reaches an async actor before
        the call's coroutine is queued there (ray-project/ray#52628), and asking again does not
        help: the call runs to its end. So the host is asked too (`AgentHost.cancel`), and it
        stops the call, or refuses it when it comes.

        Not recursive: the call's delegations stop because their callers stop waiting (`dispatch`
        cancels each of its own), and a recursive cancellation would also cancel the agent's
        calls to the ledger in flight, losing the events and steps they carry and ending the
        agent `failed` (Ray's `TaskCancelledError` is an exception to it, not a cancellation).
        """
        ray.cancel(ref, recursive=False)
        call = self._calls.get(ref)
        if call is not None:
            handle, attempt = call
            handle.cancel.remote(attempt)

    async def dispatch(
        self,
        target: str,
        delegation: Delegation,
        on_submit: Callable[[ray.ObjectRef[bytes]], None] | None = None,
        opening: Event | None = None,
    ) -> AgentResult:
        """Hand `delegation` to a replica of `target` and return its result.

        `opening`: the run's first event, for the entry agent to send to the ledger with its
        own (with every attempt: the ledger keeps the first that comes). A ledger call saved
        per run; whoever finishes the run hands it to `LedgerClient.finish` too, for a run
        whose entry agent was never reached.
        """
        self.follow_scaling()
        here = self._local.get(target)
        if here is not None:
            if opening is not None and self._ledger is not None:
                self._ledger.outbox.emit(delegation.context.run_id, opening)
            return await invoke_here(here, delegation)
        ctx = delegation.context
        retried = False
        transient = 0  # calls lost on their way to or from an actor that is up, made again
        while True:
            attempt = uuid.uuid4().hex[:16]
            attempted = delegation.model_copy(
                update={"context": ctx.model_copy(update={"attempts": (*ctx.attempts, attempt)})}
            )
            name, lost = await self._attempt(target, attempted, on_submit, opening)
            if not isinstance(lost, BaseException):
                return lost
            if (
                isinstance(lost, ActorUnavailableError)
                and transient < TRANSIENT_RETRIES
                and await self._until_restarted(name, ALIVE_WAIT_S)
            ):
                # Its request or its reply was lost (the actor may have run it): made again
                # as any retry is, from the step log or if nothing at-most-once had started.
                started = [] if ctx.step_log else await self._effects(ctx.run_id, attempt)
                if not started:
                    transient += 1
                    delegation = delegation.model_copy(update={"replay": True})
                    continue
            why = "retried once" if retried else "not retried"
            if not retried and self._system.restartable(target):
                # With a step log the retry resumes the invocation from its record (what must
                # run at most once and had started is not run again); without, it is made
                # only if nothing of the kind had started.
                started = [] if ctx.step_log else await self._effects(ctx.run_id, attempt)
                if not started:
                    down = await self._until_back(target, name, delegation)
                    if down is None:
                        retried = True
                        delegation = delegation.model_copy(update={"replay": True})
                        continue
                    why = f"not retried: {down}"
                else:
                    effects = ", ".join(sorted(set(started)))
                    why = f"not retried: {effects} had started (at most once)"
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
        on_submit: Callable[[ray.ObjectRef[bytes]], None] | None,
        opening: Event | None = None,
    ) -> tuple[str, AgentResult | BaseException]:
        """One try: the result, or the error of an actor that died or cannot be found."""
        replica = self._next(target)
        name = self._system.actor_name(target, replica)
        submitted_ns = time.time_ns()
        ref: ray.ObjectRef[bytes] | None = None
        # An agent's queue for the run goes with the call (`Outbox.hand_over`); kept here, to
        # be sent from here unless the call returns (the ledger opens it once).
        down = None
        if self._hand_back and self._ledger is not None:
            down = self._ledger.outbox.hand_over(delegation.context.run_id)
        try:
            ref = self.submit(target, delegation, opening, down, replica)
            if on_submit is not None:
                on_submit(ref)
            # Shielded: a result that comes as the caller stops waiting still hands its
            # events and spans over (they left the callee's process with it).
            received = asyncio.ensure_future(self._received(ref, delegation.context.run_id))
            try:
                result = await asyncio.shield(received)
                down = None  # the callee's process sent it, or handed it back with the result
                return name, result
            except asyncio.CancelledError:
                # The caller stopped waiting (timeout, cancellation): stop the work too.
                self.cancel(ref)
                received.add_done_callback(_retrieved)
                raise
        except (RayActorError, ActorUnavailableError, ValueError) as exc:
            # A dead or missing actor is the caller's tool error, never a hung run.
            self._handles.pop((target, replica), None)
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
                ctx.thread_id,
            )
            return name, exc
        finally:
            if ref is not None:
                self._calls.pop(ref, None)
            if down is not None and self._ledger is not None:
                self._ledger.outbox.take_over(down)

    async def _received(self, ref: ray.ObjectRef[bytes], run_id: str) -> AgentResult:
        """The callee's result, once what it handed over is queued here (`hand_back`).

        The counts of the run's items the reply brings are kept (they go up with this
        process's own reply, or, in the orchestrator's, to the ledger to settle the run). An
        agent's process leaves the result's subtree sealed (it only carries it up); the
        orchestrator's opens it.
        """
        reply = unseal(await ref, HostReply)
        if self._ledger is not None:
            outbox = self._ledger.outbox
            if reply.handover is not None:
                outbox.take_over(reply.handover)
            outbox.heard(run_id, reply.sent)
        return Arrived.of(reply) if self._hand_back else open_tree(reply)

    async def _until_back(self, target: str, name: str, delegation: Delegation) -> str | None:
        """Wait, within the run's deadline, until the actor `name` of `target` is back.

        Returns None when it is (or may be: Ray's own restarts are awaited as far as they can
        be), else why it will not be. A supervised host's wait is a span and, once it is back,
        a `host_restarted` event of the run.
        """
        ctx = delegation.context
        if not self._system.supervised:
            await self._until_restarted(name, ctx.time_left())
            return None
        began = time.monotonic()
        with host_wait_span(target, name, ctx.run_id) as span:
            try:
                supervisor = ray.get_actor(
                    self._system.supervisor_name, namespace=self._system.namespace
                )
                state: HostState | None = await supervisor.back.remote(name, ctx.time_left())
            except (RayActorError, ActorUnavailableError, ValueError) as exc:
                state = None
                host_came_back(span, "unknown", 0, f"its supervisor: {describe_error(exc)}")
            if state is None:  # not watched (or the supervisor is away): as Ray has it
                await self._until_restarted(name, ctx.time_left())
                return None
            host_came_back(span, state["state"], state["restarts"], state["cause"])
        if state["state"] == "crash_loop":
            self.left_down[target] = str(state["cause"])
            return f"its host is left down ({state['cause']})"
        if state["state"] != "alive":
            return "its host was not back before the run's deadline"
        if self._ledger is not None:
            self._ledger.outbox.emit(
                ctx.run_id,
                HostRestarted(
                    agent=target,
                    chain=list(ctx.chain),
                    actor=name,
                    cause=state["cause"],
                    restarts=state["restarts"],
                    waited_s=round(time.monotonic() - began, 3),
                ),
            )
        return None

    async def _until_restarted(self, name: str, limit_s: float) -> bool:
        """Wait (at most `limit_s`) until the actor `name` answers again; whether it did.

        After Ray restarts it, or while calls to it are lost on the way.

        Ray fails calls made while an actor is restarting rather than queueing them. An actor
        that is dead for good (its restarts spent) answers at once: the retry says so. Ray
        forgets a dead detached actor's name (`baton serve`'s are detached): a name it no
        longer knows is such an actor, not one still restarting (a restarting actor keeps it).
        """
        deadline = time.monotonic() + max(limit_s, 0.0)
        pause = 0.05
        while time.monotonic() < deadline:
            try:
                handle = ray.get_actor(name, namespace=self._system.namespace)
            except ValueError:
                return False  # no such actor any more: dead for good
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0.01)):
                    await handle.stats.remote()
                return True
            except (ActorUnavailableError, TimeoutError):
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
            except RayActorError:
                return False  # dead for good: the retry will say so
        return False

    async def _effects(self, run_id: str, attempt: str) -> list[str]:
        if self._ledger is None:
            return ["(unknown: no ledger)"]
        try:
            return await self._ledger.effects(run_id, attempt)
        except Exception:
            return ["(unknown: the ledger did not answer)"]


def _retrieved(done: asyncio.Future[AgentResult]) -> None:
    """Take the outcome of a call nobody waits for any more (its error is expected)."""
    if not done.cancelled():
        done.exception()
