"""The tool half of the tool loop, and the events and span content both halves record.

A model step's tool calls run with bounded concurrency, each behind its approval gate, its
timeout, its retry policy and the delegation guard.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from opentelemetry import trace

from agents.core.errors import DelegationRefused
from agents.core.events import ApprovalRequested, Event, EventBase, ToolFinished, ToolStarted
from agents.core.events import DelegationRefused as DelegationRefusedEvent
from agents.core.limits import TraceOptions
from agents.core.messages import AgentResult, Delegation, Refusal, RunContext, Usage
from agents.core.ports import Approvals, EventSink, Ledger, SpanSource
from agents.core.spec import AgentSpec
from agents.core.steps import (
    Journal,
    Step,
    StepKind,
    approval_key,
    child_invocation,
    started_key,
    tool_key,
)
from agents.models.base import ToolCall
from agents.runtime.replay import Record, output_data, output_of
from agents.tools.base import FunctionTool, Tool, ToolCallContext, ToolOutput
from agents.tools.delegate import DelegateTool
from tracing import Redactor, record_content, set_outcome, span_ids, tool_span
from tracing import attributes as attr

__all__ = ["DELEGATION_GRACE_S", "Invocation", "ToolCalls"]

_E = TypeVar("_E", bound=EventBase)
# A child gets this long past the run deadline to report its own limit before its caller stops
# waiting for it.
DELEGATION_GRACE_S = 2.0
# How much of a call's arguments a person sees when asked to approve it.
_APPROVAL_ARGUMENTS_CHARS = 4000


@dataclass
class Invocation:
    """One delegation being worked on: its steps, usage, children and events so far."""

    delegation: Delegation
    max_steps: int
    started_at: float = field(default_factory=time.time)
    clock: float = field(default_factory=time.perf_counter)
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    children: list[AgentResult] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    # Given by the delegation (derived from the caller's step); else random. Not uuid4: its
    # `os.urandom` is a system call, and every invocation would pay it under the GIL.
    id: str = field(default_factory=lambda: f"{random.getrandbits(64):016x}")
    seq: int = 0  # events emitted so far
    trace_id: int = 0  # the run's trace (0 until the invocation's span has started)
    record: Record = field(default_factory=Record)  # its steps from an earlier execution
    tools_called: list[str] = field(default_factory=list)  # names, in order (step rules, hooks)
    history: list[dict[str, Any]] = field(default_factory=list)  # the conversation, for hand-offs

    @property
    def ctx(self) -> RunContext:
        """The run context the delegation carries."""
        return self.delegation.context


class ToolCalls:
    """Tool calls and event recording, for `AgentRuntime` (which provides these fields)."""

    spec: AgentSpec
    ledger: Ledger | None
    events: EventSink | None
    span_source: SpanSource | None
    approvals: Approvals | None
    journal: Journal | None
    trace_options: TraceOptions
    redactor: Redactor
    _by_name: Mapping[str, Tool]

    def _event(self, inv: Invocation, kind: type[_E], **data: Any) -> _E:
        inv.seq += 1
        return kind(
            agent=self.spec.name,
            chain=list(inv.ctx.chain),
            invocation=inv.id,
            seq=inv.seq,
            **self.redactor.value(data),
        )

    def _journaled(self, inv: Invocation) -> bool:
        """Whether the invocation's steps go to the run's step log."""
        return inv.ctx.journal and self.journal is not None

    def _step(self, inv: Invocation, key: str, kind: StepKind, data: dict[str, Any]) -> Step:
        # Scrubbed like events: the store never holds a secret (a resumed run reads the
        # placeholder where a tool's result had one).
        data = self.redactor.value(data)
        return Step(invocation=inv.id, key=key, kind=kind, data=data, epoch=inv.ctx.epoch)

    def _emit(self, inv: Invocation, kind: type[EventBase], **data: Any) -> None:
        if self.events is not None:
            self.events.emit(inv.ctx.run_id, cast("Event", self._event(inv, kind, **data)))

    def _send_finished_spans(self, inv: Invocation) -> None:
        """Send the spans finished so far along with the events (called after a step ends).

        A process that dies mid-invocation then takes no finished work with it.
        """
        if self.span_source is None or self.events is None or not inv.trace_id:
            return
        spans = self.span_source.drain(inv.trace_id)
        if spans:
            self.events.keep_spans(inv.ctx.run_id, spans)

    def _capturing(self, span: trace.Span) -> bool:
        """Whether `span` records message contents (opt-in): build costly values only then."""
        return self.trace_options.capture_content and span.is_recording()

    def _content(self, span: trace.Span, key: str, value: Any) -> None:
        if self._capturing(span):
            record_content(span, key, value, self.trace_options.max_content_chars)

    async def _run_tools(self, inv: Invocation, calls: list[ToolCall]) -> list[ToolOutput]:
        gate = asyncio.Semaphore(inv.ctx.limits.max_parallel_tools)

        async def bounded(call: ToolCall) -> ToolOutput:
            async with gate:
                return await self._run_tool(inv, call)

        if len(calls) == 1:
            return [await self._run_tool(inv, calls[0])]
        return list(await asyncio.gather(*(bounded(c) for c in calls)))

    async def _run_tool(self, inv: Invocation, call: ToolCall) -> ToolOutput:
        tool = self._by_name.get(call.name)
        target = tool.target.name if isinstance(tool, DelegateTool) else None
        key = tool_key(inv.steps, call.id)
        # A delegation is never taken from the record: the callee resumes from its own.
        recorded = inv.record.get(key) if target is None else None
        with tool_span(call.name, call.id, delegate_to=target) as span:
            ids = span_ids(span)
            if self._journaled(inv):
                span.set_attribute(attr.BATON_STEP, f"{inv.id}/{key}")
            self._content(span, attr.GEN_AI_TOOL_CALL_ARGUMENTS, call.arguments)
            self._content(span, attr.INPUT_VALUE, call.arguments)
            if recorded is not None:
                out = output_of(recorded)
                span.set_attribute(attr.BATON_REPLAYED, True)
            elif target is None and inv.ctx.replay_only:
                out = ToolOutput(f"error: replay: {call.name} has no recorded result", True)
            else:
                self._emit(inv, ToolStarted, tool=call.name, call_id=call.id, target=target, **ids)
                out = await self._execute(inv, call, key)
                if target is None and self._journaled(inv):
                    assert self.journal is not None
                    step = self._step(inv, key, "tool_result", output_data(out))
                    self.journal.record(inv.ctx.run_id, step)
            self._content(span, attr.GEN_AI_TOOL_CALL_RESULT, out.content)
            set_outcome(span, out.content[:200] if out.is_error else None, "tool_error")
        if recorded is None:
            self._emit(
                inv, ToolFinished, tool=call.name, call_id=call.id, error=out.is_error, **ids
            )
        self._send_finished_spans(inv)
        return out

    async def _execute(self, inv: Invocation, call: ToolCall, key: str) -> ToolOutput:
        ctx = inv.ctx
        tool = self._by_name.get(call.name)
        if tool is None:
            return ToolOutput(f"error: unknown tool {call.name!r}", is_error=True)
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return ToolOutput(f"error: arguments are not valid JSON ({exc})", is_error=True)
        if not isinstance(arguments, dict):
            return ToolOutput("error: arguments must be a JSON object", is_error=True)
        if getattr(tool, "confirm", False):  # set by function, MCP and delegation tools
            not_approved = await self._approval(inv, call, arguments)
            if not_approved is not None:
                return not_approved
        is_delegation = isinstance(tool, DelegateTool)
        if not is_delegation and not getattr(tool, "idempotent", False):
            refused = await self._once(inv, tool, call, key)
            if refused is not None:
                return refused
        timeout = (
            ctx.time_left() + DELEGATION_GRACE_S
            if is_delegation
            else min(self.spec.timeouts.tool, ctx.time_left())
        )
        retries = tool.retries if isinstance(tool, FunctionTool) else 0
        for attempt in range(retries + 1):
            try:
                context = ToolCallContext(
                    ctx,
                    self.spec.name,
                    call.id,
                    child_invocation=child_invocation(inv.id, key),
                    replay=self._callee_replays(inv),
                    history=inv.history,
                )
                # Not `asyncio.wait_for`: on Python 3.11 it returns the result of a call that
                # ends in the loop's turn in which the run is cancelled, and the cancellation
                # is lost (the run goes on to its next step; fixed in 3.12). Within
                # `asyncio.timeout` the call runs in this task, which stays cancelled.
                async with asyncio.timeout(max(timeout, 0.001)):
                    return await tool.call(arguments, context)
            except DelegationRefused as refused:
                return self._refused(inv, call, refused)
            except Exception as exc:
                if attempt < retries and ctx.time_left() > 0:  # idempotent: same key again
                    await asyncio.sleep(min(0.05 * 2**attempt, 1.0))
                    continue
                if isinstance(exc, TimeoutError):
                    return ToolOutput(
                        f"error: tool {call.name} timed out after {timeout:.1f}s", is_error=True
                    )
                return ToolOutput(f"error: {type(exc).__name__}: {exc}", is_error=True)
        raise AssertionError("unreachable")

    def _callee_replays(self, inv: Invocation) -> bool:
        """Whether an agent this invocation delegates to may find steps of its own recorded.

        In a fork from a chosen step, what the forked invocation delegates once it is live
        runs live too.
        """
        if inv.id == inv.ctx.fork_from:
            return not inv.record.diverged
        return inv.delegation.replay or inv.ctx.epoch > 0

    async def _once(
        self, inv: Invocation, tool: Tool, call: ToolCall, key: str
    ) -> ToolOutput | None:
        """Record that a call that must run at most once starts; None: go ahead.

        Stored before the call is made (the barrier). A call that had started before the run
        was interrupted, and left no result, is not made again: its outcome is unknown.
        Without a step log, a function tool's start is noted in the ledger, so that a retried
        delegation can tell that the call may have happened.
        """
        if not self._journaled(inv):
            if not isinstance(tool, FunctionTool) or self.ledger is None:
                return None
            try:
                await self.ledger.record_effect(inv.ctx.run_id, inv.ctx.attempts, call.name)
            except Exception as exc:
                return ToolOutput(
                    f"error: {call.name} was not run: its call could not be recorded "
                    f"first ({type(exc).__name__})",
                    is_error=True,
                )
            return None
        assert self.journal is not None
        start = started_key(inv.steps, call.id)
        if inv.record.get(start) is not None:
            return ToolOutput(
                f"error: {call.name} had started before the run was interrupted and left no "
                "result; it is not run again (it is not marked idempotent)",
                is_error=True,
            )
        stored = await self.journal.commit(
            inv.ctx.run_id, self._step(inv, start, "tool_started", {"tool": call.name})
        )
        if not stored:
            return ToolOutput(
                f"error: {call.name} was not run: its start could not be recorded first, or "
                "the run was resumed elsewhere",
                is_error=True,
            )
        return None

    async def _approval(
        self, inv: Invocation, call: ToolCall, arguments: dict[str, Any]
    ) -> ToolOutput | None:
        """Wait for a person to approve the call (or take the decision recorded before).

        Returns None if approved, else what the model is told (a denial is a tool result, so the
        model can change course).
        """
        key = approval_key(inv.steps, call.id)
        recorded = inv.record.get(key)
        if recorded is not None:
            decision: dict[str, Any] = recorded.data
            trace.get_current_span().set_attribute(attr.BATON_REPLAYED, True)
        elif inv.ctx.replay_only:
            return ToolOutput(f"error: replay: no decision on {call.name} recorded", True)
        else:
            asked = await self._ask_person(inv, call, arguments, key)
            if isinstance(asked, ToolOutput):
                return asked
            decision = asked
            if self._journaled(inv):
                # Stored (by the ledger as it was decided; here again in case that write was
                # lost) before the call goes ahead: a run resumed later does not ask again.
                assert self.journal is not None
                step = self._step(inv, key, "approval", {**decision, "at": time.time()})
                if not await self.journal.commit(inv.ctx.run_id, step):
                    decision = {**decision, "approved": False, "by": "expiry"}
        if decision["approved"]:
            return None
        reason = "denied by a person" if decision["by"] == "person" else "approval expired"
        return ToolOutput(
            json.dumps(
                {
                    "error": "not_approved",
                    "tool": call.name,
                    "reason": reason,
                    "message": decision.get("message") or "",
                }
            ),
            is_error=True,
        )

    async def _ask_person(
        self, inv: Invocation, call: ToolCall, arguments: dict[str, Any], key: str
    ) -> dict[str, Any] | ToolOutput:
        """Ask for a decision on the call and wait for it (expiry denies)."""
        ctx = inv.ctx
        span = trace.get_current_span()
        if self.approvals is None:
            return ToolOutput(
                f"error: {call.name} needs a person's approval, and this run has no one to ask "
                "(submit it to the Baton service)",
                is_error=True,
            )
        wait = max(0.0, min(ctx.limits.approval_timeout_s, ctx.time_left()))
        shown = json.dumps(arguments, default=str)
        event = self._event(
            inv,
            ApprovalRequested,
            call_id=call.id,  # made unique by the ledger
            tool=call.name,
            tool_call_id=call.id,
            arguments=shown[:_APPROVAL_ARGUMENTS_CHARS],
            expires_at=time.time() + wait,
            record_key=key if self._journaled(inv) else None,
            **span_ids(span),
        )
        approval_id = await self.approvals.request_approval(ctx.run_id, call.id, event)
        span.add_event(attr.EVENT_APPROVAL_REQUESTED, {attr.BATON_APPROVAL_ID: approval_id})
        decision = await self.approvals.await_decision(ctx.run_id, approval_id, wait)
        if decision is None:  # expired: deny, unless a person got there first
            _, decision = await self.approvals.decide(
                ctx.run_id, approval_id, False, f"no decision within {wait:.0f}s", "expiry"
            )
        assert decision is not None
        span.add_event(
            attr.EVENT_APPROVAL_DECIDED,
            {"approved": bool(decision["approved"]), "by": str(decision["by"])},
        )
        return decision

    def _refused(self, inv: Invocation, call: ToolCall, refused: DelegationRefused) -> ToolOutput:
        inv.refusals.append(Refusal.of(refused, call.id))
        self._emit(
            inv,
            DelegationRefusedEvent,
            target=refused.target,
            reason=refused.reason,
            message=refused.message,
            call_id=call.id,
            **span_ids(trace.get_current_span()),
        )
        trace.get_current_span().add_event(
            attr.EVENT_DELEGATION_REFUSED,
            {attr.BATON_REFUSAL_REASON: refused.reason, "message": refused.message},
        )
        return ToolOutput(
            json.dumps(
                {
                    "error": "delegation_refused",
                    "reason": refused.reason,
                    "message": refused.message,
                }
            ),
            is_error=True,
        )
