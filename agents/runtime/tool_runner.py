"""The tool half of the tool loop: a model step's tool calls.

They run with bounded concurrency, each behind its approval gate, its timeout, its retry policy
and the delegation guard; calls that must run at most once are recorded before they are made.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from agents.core.errors import DelegationRefused, describe_error
from agents.core.events import DelegationRefusedEvent, ToolFinished, ToolStarted
from agents.core.messages import Refusal
from agents.core.ports import Ledger
from agents.core.spec import AgentSpec
from agents.core.state import State
from agents.core.steps import child_invocation, tool_key
from agents.models.base import ToolCall
from agents.runtime.invocation import DELEGATION_GRACE_S, Invocation
from agents.runtime.people import People
from agents.runtime.replay import output_data, output_of
from agents.runtime.reporting import Reporter
from agents.tools.ask import AskUserTool
from agents.tools.base import FunctionTool, Tool, ToolCallContext, ToolOutput
from agents.tools.delegate import DelegateTool
from tracing import attributes as attr
from tracing import set_outcome, span_ids, tool_span

__all__ = ["GuardTool", "ToolRunner"]

# What wraps each tool call (`agents.runtime.steering.Steering.tool_call`): it gets the
# invocation, the call and the call itself, to make or not.
GuardTool = Callable[
    [Invocation, ToolCall, Callable[[], Awaitable[ToolOutput]]], Awaitable[ToolOutput]
]


@dataclass
class ToolRunner:
    """Runs a model step's tool calls for one agent.

    Args:
        spec: the agent.
        tools: every tool a model may call, by name (shared with the runtime, which adds to it).
        reporter: where events, steps and span contents go.
        people: where calls marked `confirm` wait for a person's approval, and questions
            (`ask_user`) for an answer.
        ledger: the run-wide record (at-most-once calls without a step log).
        guard: what wraps each call (guardrails and hooks); None: nothing.
    """

    spec: AgentSpec
    tools: Mapping[str, Tool]
    reporter: Reporter
    people: People
    ledger: Ledger | None = None
    guard: GuardTool | None = None

    async def run(self, inv: Invocation, calls: list[ToolCall]) -> list[ToolOutput]:
        """Run the calls (concurrently up to the run's `max_parallel_tools`), in their order."""
        gate = asyncio.Semaphore(inv.ctx.limits.max_parallel_tools)

        async def bounded(call: ToolCall) -> ToolOutput:
            async with gate:
                return await self._run_tool(inv, call)

        if len(calls) == 1:
            return [await self._run_tool(inv, calls[0])]
        return list(await asyncio.gather(*(bounded(c) for c in calls)))

    async def call(
        self,
        inv: Invocation,
        call: ToolCall,
        *,
        step: int | None = None,
        marks: Mapping[str, str | int] | None = None,
    ) -> ToolOutput:
        """One call made by code, not by a model step (a workflow's).

        `step`: its number in the step log (the invocation's step by default); `marks`:
        attributes of its span (where in the workflow it was made).
        """
        return await self._run_tool(inv, call, step, marks)

    async def _run_tool(
        self,
        inv: Invocation,
        call: ToolCall,
        step: int | None = None,
        marks: Mapping[str, str | int] | None = None,
    ) -> ToolOutput:
        tool = self.tools.get(call.name)
        target = tool.target.name if isinstance(tool, DelegateTool) else None
        key = tool_key(inv.steps if step is None else step, call.id)
        # A delegation is never taken from the record: the callee resumes from its own.
        recorded = inv.recorded.get(key) if target is None else None
        with tool_span(call.name, call.id, delegate_to=target) as span:
            for name, value in (marks or {}).items():
                span.set_attribute(name, value)
            ids = span_ids(span)
            if self.reporter.logs_steps(inv):
                span.set_attribute(attr.BATON_STEP, f"{inv.id}/{key}")
            self.reporter.content(span, attr.GEN_AI_TOOL_CALL_ARGUMENTS, call.arguments)
            self.reporter.content(span, attr.INPUT_VALUE, call.arguments)
            if recorded is not None:
                out = output_of(recorded)
                span.set_attribute(attr.BATON_REPLAYED, True)
            elif target is None and inv.ctx.replay_only:
                out = ToolOutput(f"error: replay: {call.name} has no recorded result", True)
            else:
                self.reporter.emit(
                    inv, ToolStarted, tool=call.name, call_id=call.id, target=target, **ids
                )
                out = await self._guarded(inv, call, key)
                if target is None and self.reporter.logs_steps(inv):
                    self.reporter.record(inv, key, "tool_result", output_data(out))
            if out.child is not None and out.child.input_kept is not None:
                # The callee's input guardrail blocked part of what it was asked: not kept here.
                kept = json.dumps({"task": out.child.input_kept})
                self.reporter.content(span, attr.GEN_AI_TOOL_CALL_ARGUMENTS, kept)
                self.reporter.content(span, attr.INPUT_VALUE, kept)
            self.reporter.content(span, attr.GEN_AI_TOOL_CALL_RESULT, out.content)
            set_outcome(span, out.content[:200] if out.is_error else None, "tool_error")
        if recorded is None:
            self.reporter.emit(
                inv, ToolFinished, tool=call.name, call_id=call.id, error=out.is_error, **ids
            )
        self.reporter.send_finished_spans(inv)
        return out

    async def _guarded(self, inv: Invocation, call: ToolCall, key: str) -> ToolOutput:
        """The call, inside its guardrails and hooks (`guard`)."""
        if self.guard is None:
            return await self._execute(inv, call, key)
        return await self.guard(inv, call, lambda: self._execute(inv, call, key))

    async def _execute(self, inv: Invocation, call: ToolCall, key: str) -> ToolOutput:
        ctx = inv.ctx
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolOutput(f"error: unknown tool {call.name!r}", is_error=True)
        arguments = _arguments(call)
        if isinstance(arguments, ToolOutput):
            return arguments
        if isinstance(tool, AskUserTool):
            return await self.people.ask(inv, call, arguments)
        if getattr(tool, "confirm", False):  # set by function, MCP and delegation tools
            not_approved, approved = await self.people.approve(
                inv, call, arguments, tool.parameters
            )
            if not_approved is not None:
                return not_approved
            if approved is not arguments:  # the person edited them: what the span says too
                arguments = approved
                shown = json.dumps(arguments)
                self.reporter.content(
                    trace.get_current_span(), attr.GEN_AI_TOOL_CALL_ARGUMENTS, shown
                )
                self.reporter.content(trace.get_current_span(), attr.INPUT_VALUE, shown)
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
            state = inv.state_view(self.spec.name)  # (an attempt's writes start afresh)
            try:
                context = self._context(inv, call, key, state)
                # Not `asyncio.wait_for`: on Python 3.11 it returns the result of a call that
                # ends in the loop's turn in which the run is cancelled, and the cancellation
                # is lost (the run goes on to its next step; fixed in 3.12). Within
                # `asyncio.timeout` the call runs in this task, which stays cancelled.
                async with asyncio.timeout(max(timeout, 0.001)):
                    out = await tool.call(arguments, context)
                if not out.is_error:  # a failed call changes nothing
                    out.changes = state.changes
                return out
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
                return ToolOutput(f"error: {describe_error(exc)}", is_error=True)
        raise AssertionError("unreachable")

    def _context(self, inv: Invocation, call: ToolCall, key: str, state: State) -> ToolCallContext:
        """Who makes the call and where, as the tool is told."""
        return ToolCallContext(
            inv.ctx,
            self.spec.name,
            call.id,
            child_invocation=child_invocation(inv.id, key),
            replay=self._callee_replays(inv, key),
            history=inv.history,
            step=inv.steps,
            # (a workflow's calls are bounded by its code, not counted)
            visits=inv.visits if self.spec.workflow is None else None,
            state=state,
            invocation=inv.id,
        )

    def _callee_replays(self, inv: Invocation, key: str) -> bool:
        """Whether the agent the call `key` delegates to may find steps of its own recorded.

        In a fork from a chosen step, the delegation made there runs live, and so does what
        the forked invocation delegates once it is live.
        """
        fork = inv.ctx.fork_from
        if fork is not None and inv.id == fork[0]:
            return key != fork[1] and not inv.recorded.diverged
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
        if not self.reporter.logs_steps(inv):
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
        start = f"{key}:started"  # (`started_key` of the call's step)
        if inv.recorded.get(start) is not None:
            return ToolOutput(
                f"error: {call.name} had started before the run was interrupted and left no "
                "result; it is not run again (it is not marked idempotent)",
                is_error=True,
            )
        stored = await self.reporter.commit(inv, start, "tool_started", {"tool": call.name})
        if not stored:
            return ToolOutput(
                f"error: {call.name} was not run: its start could not be recorded first, or "
                "the run was resumed elsewhere",
                is_error=True,
            )
        return None

    def _refused(self, inv: Invocation, call: ToolCall, refused: DelegationRefused) -> ToolOutput:
        inv.refusals.append(Refusal.of(refused, call.id))
        self.reporter.emit(
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


def _arguments(call: ToolCall) -> dict[str, Any] | ToolOutput:
    """The call's arguments, or the error the model is told when they are not a JSON object."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return ToolOutput(f"error: arguments are not valid JSON ({exc})", is_error=True)
    if not isinstance(arguments, dict):
        return ToolOutput("error: arguments must be a JSON object", is_error=True)
    return arguments
