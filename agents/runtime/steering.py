"""The checks around an agent's steps: guardrails, hooks and step rules (see `hooks`).

A mixin of `AgentRuntime`, apart from the tool loop itself so that each stays short.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from opentelemetry import trace

from agents.core.guardrail_spec import JudgeSpec
from agents.core.messages import AgentResult, RunStatus
from agents.core.spec import ModelSpec
from agents.models.base import ModelClient, ModelReply, ToolCall
from agents.runtime.calls import Invocation
from agents.runtime.context import Summarize, fit
from agents.runtime.guardrails import Guardrails, Judge, Tripped
from agents.runtime.hooks import (
    HookContext,
    Hooks,
    ModelRequest,
    Veto,
    apply_rules,
    call_hook,
)
from agents.runtime.model_calls import ModelCalls
from agents.tools.base import ToolOutput
from tracing import attributes as attr
from tracing import chat_span

__all__ = ["Steering"]


class Steering(ModelCalls):
    """Guardrails, hooks and step rules, for `AgentRuntime` (which provides these fields)."""

    _guardrails: Guardrails
    _hooks: list[Hooks]

    def _hook_context(self, inv: Invocation) -> HookContext:
        return HookContext(
            agent=self.spec.name,
            run_id=inv.ctx.run_id,
            chain=inv.ctx.chain,
            step=inv.steps,
            usage=inv.usage,
            tools_called=tuple(inv.tools_called),
        )

    async def _hooks_call(self, inv: Invocation, method: str, *args: Any) -> list[Any]:
        """Every hook's `method`, in order (`HookFailed`, `Stopped` raised as they come)."""
        context = self._hook_context(inv)
        return [await call_hook(hook, method, context, *args) for hook in self._hooks]

    async def _request(self, inv: Invocation, messages: list[dict[str, Any]]) -> ModelRequest:
        """The next model call: the agent's (fitted), then changed by step rules and hooks."""
        fitted = await fit(messages, self.spec.context, self.model, self._summarizer(inv))
        if fitted.dropped or fitted.summarized:
            trace.get_current_span().add_event(
                attr.EVENT_CONTEXT_FITTED,
                {
                    "step": inv.steps,
                    "dropped_tool_results": fitted.dropped,
                    "summarized_messages": fitted.summarized,
                    "tokens": fitted.tokens,
                },
            )
        request = ModelRequest(self.model.model, list(fitted.messages), list(self._schemas))
        rules = self.spec.step_rules
        if rules:
            left = None
            if any(r.when.budget_below for r in rules) and self.ledger is not None:
                left = await self.ledger.tokens_left(inv.ctx.run_id)
            applied = apply_rules(rules, request, self._hook_context(inv), left)
            if applied:
                trace.get_current_span().add_event(
                    attr.EVENT_STEP_RULES, {"step": inv.steps, "rules": applied}
                )
        if self._hooks:
            await self._hooks_call(inv, "before_model", request)
        return request

    async def _after_model(self, inv: Invocation, reply: ModelReply) -> None:
        if self._hooks:
            await self._hooks_call(inv, "after_model", reply)

    async def _answer(self, inv: Invocation, output: str) -> AgentResult:
        """The final answer, once the output guardrails have let it through."""
        if self._guardrails:
            tripped = await self._guardrails.check("output", output, self._judge(inv))
            if tripped is not None:
                return self._tripped(inv, tripped)
        return self._end(inv, RunStatus.SUCCEEDED, output=output)

    def _tripped(self, inv: Invocation, tripped: Tripped) -> AgentResult:
        _note_trip(tripped)
        return self._end(inv, RunStatus.GUARDRAIL_TRIPPED, error=str(tripped))

    async def _execute(self, inv: Invocation, call: ToolCall, key: str) -> ToolOutput:
        """A tool call between its guardrails and hooks: the arguments first, the result after."""
        inv.tools_called.append(call.name)
        guarded, judge = bool(self._guardrails.spec.tools), self._judge(inv)
        if guarded:
            _, tripped = await self._guardrails.tool(call.name, "arguments", call.arguments, judge)
            if tripped is not None:
                _note_trip(tripped)
                return ToolOutput(f"error: {tripped}", is_error=True)
        if self._hooks:
            said = await self._hooks_call(inv, "before_tool", call.name, _parsed(call.arguments))
            for hook, answer in zip(self._hooks, said, strict=True):
                if isinstance(answer, Veto):
                    trace.get_current_span().add_event(
                        attr.EVENT_HOOK_VETO, {"hook": type(hook).__name__, "reason": answer.reason}
                    )
                    who = type(hook).__name__
                    return ToolOutput(f"error: vetoed by {who}: {answer.reason}", is_error=True)
        out = await super()._execute(inv, call, key)
        content = out.content
        if guarded:
            content, tripped = await self._guardrails.tool(call.name, "result", content, judge)
            if tripped is not None:
                _note_trip(tripped)
                return ToolOutput(f"error: {tripped}", is_error=True, child=out.child)
        if self._hooks:
            for answer in await self._hooks_call(inv, "after_tool", call.name, content):
                content = answer if isinstance(answer, str) else content
        return dataclasses.replace(out, content=content)

    def _summarizer(self, inv: Invocation) -> Summarize:
        chosen = self.spec.context.model
        model = self.model
        if chosen is not None and self.models is not None:
            model = self.models(
                ModelSpec.model_validate({"name": chosen} if isinstance(chosen, str) else chosen)
            )

        async def summarize(messages: list[dict[str, Any]]) -> str:
            said = await self._side_call(inv, model, _SUMMARIZE, _transcript(messages))
            return said or "(nothing to summarize)"

        return summarize

    async def _side_call(self, inv: Invocation, model: ModelClient, system: str, text: str) -> str:
        """A model call beside the steps (a judge, a summary): own span, tokens counted."""
        with chat_span(model.model) as span:
            reply = await model.complete(
                [{"role": "system", "content": system}, {"role": "user", "content": text}], []
            )
            span.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, reply.input_tokens)
            span.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, reply.output_tokens)
        self._spent(inv, reply)
        return (reply.content or "").strip()

    def _judge(self, inv: Invocation) -> Judge:
        """Asks a guardrail's judge model (its own span; its tokens count for the run)."""

        async def ask(judge: JudgeSpec, text: str) -> str | None:
            if self.models is None:
                return "no model client for the judge here"
            spec = ModelSpec.model_validate(
                {"name": judge.model} if isinstance(judge.model, str) else judge.model
            )
            system = f"{judge.instructions}\n\nAnswer PASS if the text passes, else FAIL: why."
            said = await self._side_call(inv, self.models(spec), system, text)
            return None if said.upper().startswith("PASS") else said.removeprefix("FAIL:").strip()

        return ask


def _note_trip(tripped: Tripped) -> None:
    """A span event where it tripped (the agent's span, or the tool call's)."""
    trace.get_current_span().add_event(
        attr.EVENT_GUARDRAIL_TRIPPED,
        {
            attr.BATON_GUARDRAIL: tripped.guardrail,
            attr.BATON_GUARDRAIL_STAGE: tripped.stage,
            "reason": tripped.reason[:500],
        },
    )


def _parsed(arguments: str) -> dict[str, Any]:
    """A call's arguments for a hook to read (an empty dict when they are not a JSON object)."""
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


_SUMMARIZE = (
    "Summarize the conversation below for whoever continues it: the task, what was found (tool "
    "results, facts, numbers), what was decided and what is left to do. Be complete but brief."
)


def _transcript(messages: list[dict[str, Any]]) -> str:
    """Messages as plain text for a summary (tool calls by name and arguments)."""
    lines = []
    for m in messages:
        calls = [
            f"{c['function']['name']}({c['function']['arguments']})"
            for c in m.get("tool_calls") or []
        ]
        text = m.get("content") or ("calls " + ", ".join(calls) if calls else "")
        lines.append(f"{m.get('role')}: {text}")
    return "\n".join(lines)
