"""The tool loop: model call, tool calls, model call... until a final answer or a limit.

Tool calls run concurrently, bounded. Plain async code: it knows nothing of Ray, so it runs in
tests as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from agents.core.events import SpendWarning
from agents.core.messages import AgentResult, Refusal, RunStatus
from agents.core.ports import Ledger
from agents.core.spec import AgentSpec
from agents.core.state import StateError, fill_instructions
from agents.models.base import ToolCall
from agents.runtime.hooks import HookFailed, Stopped
from agents.runtime.invocation import Invocation
from agents.runtime.model_calls import ModelCaller
from agents.runtime.reporting import Reporter
from agents.runtime.steering import Steering
from agents.runtime.structured import OutputContract
from agents.runtime.tool_runner import ToolRunner
from agents.tools.base import ToolOutput
from tracing import attributes as attr

__all__ = ["ToolLoop"]


def opening(inv: Invocation) -> list[dict[str, Any]]:
    """The conversation an invocation starts from: handed over, or the task (with its input).

    Structured input follows what the agent is asked, as JSON.
    """
    delegation = inv.delegation
    messages = delegation.history or [{"role": "user", "content": delegation.task}]
    if delegation.input is None:
        return messages
    given = json.dumps(delegation.input, ensure_ascii=False, indent=1)
    last = messages[-1]
    text = f"{last['content']}\n\nInput (JSON):\n```json\n{given}\n```"
    return [*messages[:-1], {**last, "content": text}]


@dataclass
class ToolLoop:
    """One agent's steps for an invocation: model calls and tool calls, between its hooks.

    Args:
        spec: the agent.
        caller: its model calls.
        tools: its tool calls.
        steering: its guardrails, hooks and step rules.
        reporter: how an invocation ends.
        ledger: the run-wide record (the token budget, checked before each step).
        contract: the answer's shape, when the agent has an output schema.
    """

    spec: AgentSpec
    caller: ModelCaller
    tools: ToolRunner
    steering: Steering
    reporter: Reporter
    ledger: Ledger | None = None
    contract: OutputContract | None = None

    async def run(self, inv: Invocation) -> AgentResult:
        """The steps, between the hooks' start and end (a hook's failure fails the invocation)."""
        steering, end = self.steering, self.reporter.end
        try:
            if steering.hooks:
                await steering.hooks_call(inv, "on_start", inv.delegation.task)
            result = await self._steps(inv)
        except (HookFailed, Stopped) as exc:
            if isinstance(exc, Stopped):
                what = "the run" if exc.run else "the agent"
                steering.steered(inv, exc.hook or "a hook", f"stopped {what}")
            result = end(inv, RunStatus.FAILED, error=str(exc))
            result.stops_run = isinstance(exc, Stopped) and exc.run
        if steering.hooks:
            try:
                await steering.hooks_call(inv, "on_end", result)
            except (HookFailed, Stopped) as exc:
                result = end(inv, RunStatus.FAILED, error=str(exc))
        return result

    async def _steps(self, inv: Invocation) -> AgentResult:
        end = self.reporter.end
        messages: list[dict[str, Any]] = []
        contract = self.contract
        try:
            instructions = fill_instructions(self.spec.instructions, inv.state, inv.ctx.state_spec)
        except StateError as exc:
            return end(inv, RunStatus.FAILED, error=str(exc))
        system = [instructions, contract.instructions() if contract else ""]
        if any(system):
            messages.append({"role": "system", "content": "\n\n".join(filter(None, system))})
        # Handed over: the conversation so far goes on here; else the task starts one.
        messages += opening(inv)
        opened = len(messages)
        sent_back = 0  # answers that did not match the output schema
        refused = await self.steering.check_task(inv)
        if refused is not None:
            return refused
        while inv.steps < inv.max_steps:
            stop = await self._check_limits(inv)
            if stop is not None:
                return stop
            inv.steps += 1
            request = await self.steering.request(inv, messages)
            screen = self.steering.screen_answer if self.steering.screens_answers else None
            reply_or_stop = await self.caller.call(inv, request, screen)
            if isinstance(reply_or_stop, AgentResult):
                return reply_or_stop
            if inv.blocked is not None:  # an output guardrail stopped the answer
                return self.steering.tripped(inv, inv.blocked)
            reply = reply_or_stop
            await self.steering.after_model(inv, reply)
            if not reply.tool_calls:
                output, problem = reply.content or "", None
                if contract is not None:
                    value, problem = contract.check(output)
                    output = json.dumps(value) if problem is None else output
                if problem is None:  # (screened by the output guardrails as it came)
                    inv.exchange = messages[opened:]
                    return self.reporter.end(inv, RunStatus.SUCCEEDED, output=output)
                assert contract is not None
                trace.get_current_span().add_event(
                    attr.EVENT_OUTPUT_INVALID, {"problem": problem[:500], "try": sent_back + 1}
                )
                if sent_back >= contract.retries:
                    return end(
                        inv,
                        RunStatus.FAILED,
                        error=f"the answer did not match the output schema after "
                        f"{sent_back + 1} tries: {problem}",
                    )
                sent_back += 1
                messages += [reply.as_message(), contract.retry(problem)]
                continue
            inv.history = [m for m in messages if m.get("role") != "system"]  # for a hand-off
            messages.append(reply.as_message())
            refused_before = len(inv.refusals)
            outputs = await self.tools.run(inv, reply.tool_calls)
            self._took(inv, reply.tool_calls, outputs, messages)
            ending = self._ending(inv, outputs, inv.refusals[refused_before:])
            if ending is not None:
                return ending
        return end(
            inv,
            RunStatus.LIMIT_EXCEEDED,
            error=f"max_steps {inv.max_steps} reached without a final answer",
        )

    def _took(
        self,
        inv: Invocation,
        calls: list[ToolCall],
        outputs: list[ToolOutput],
        messages: list[dict[str, Any]],
    ) -> None:
        """What a step's calls leave: results, sub-runs and writes to the shared state.

        The writes apply in call order: parallel writers to one key merge so.
        """
        for call, out in zip(calls, outputs, strict=True):
            messages.append({"role": "tool", "tool_call_id": call.id, "content": out.content})
            if out.child is not None:
                inv.children.append(out.child)
        for out in outputs:
            self.reporter.merge(inv, out)

    def _ending(
        self, inv: Invocation, outputs: list[ToolOutput], refusals: list[Refusal]
    ) -> AgentResult | None:
        """Whether the step's tool calls end this turn, and how (None: the turn goes on).

        A hook below ended the run; control went back up the chain; the visit limit stopped a
        ping-pong; or the conversation was handed over (the receiver's answer is this one's).
        """
        end = self.reporter.end
        ended = next((o.child for o in outputs if o.child and o.child.stops_run), None)
        if ended is not None:
            result = end(inv, ended.status, error=ended.error)
            result.stops_run = True
            return result
        back = next((o for o in outputs if o.hand_back), None)
        if back is not None:
            result = end(inv, RunStatus.SUCCEEDED, output=back.content)
            result.handed_back_to = back.hand_back
            return result
        visits = next((r for r in refusals if r.reason == "visits"), None)
        if visits is not None:
            return end(inv, RunStatus.LIMIT_EXCEEDED, error=visits.message)
        took_over = next((o.child for o in outputs if o.handoff and o.child), None)
        if took_over is not None:
            result = end(inv, took_over.status, output=took_over.output, error=took_over.error)
            result.answered_by = took_over.answered_by or took_over.agent
            return result
        return None

    async def _check_limits(self, inv: Invocation) -> AgentResult | None:
        ctx = inv.ctx
        if ctx.time_left() <= 0:
            waited = (
                f" while waiting for the user's answer to: {inv.unanswered[:200]}"
                if inv.unanswered
                else f" after {inv.steps} steps"
            )
            return self.reporter.end(
                inv,
                RunStatus.LIMIT_EXCEEDED,
                error=f"run deadline ({ctx.limits.deadline_s:g}s) passed{waited}",
            )
        if ctx.limits.token_budget is not None and self.ledger is not None:
            left = await self.ledger.tokens_left(ctx.run_id)
            if left is not None and left <= 0:
                return self.reporter.end(
                    inv,
                    RunStatus.BUDGET_EXCEEDED,
                    error=f"token budget {ctx.limits.token_budget} spent after {inv.steps} steps",
                )
        if ctx.capped and self.ledger is not None:
            reached, warnings = await self.ledger.spend_check(ctx.run_id)
            for scope, message in warnings:
                self.reporter.emit(inv, SpendWarning, scope=scope, message=message)
                trace.get_current_span().add_event(
                    attr.EVENT_SPEND_WARNING,
                    {attr.BATON_SPEND_SCOPE: scope, attr.BATON_SPEND_MESSAGE: message},
                )
            if reached is not None:
                return self.reporter.end(
                    inv,
                    RunStatus.BUDGET_EXCEEDED,
                    error=f"spending cap: {reached}; no model call was made after it",
                )
        return None
