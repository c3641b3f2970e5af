"""The checks around an agent's steps: guardrails, hooks and step rules (see `hooks`).

Before each model call the conversation is fitted to the agent's context policy (`context.fit`)
and the step rules and hooks may change the request; each tool call passes the tool guardrails
and the hooks' `before_tool`/`after_tool`; the task and the final answer pass the input and
output guardrails. A judge or a summary is a model call of its own (`ModelCaller.side_call`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from agents.core.events import Steered
from agents.core.guardrail_spec import JudgeSpec
from agents.core.messages import AgentResult, RunStatus
from agents.core.ports import Ledger
from agents.core.spec import AgentSpec, ModelSpec
from agents.models.base import ModelClient, ModelReply, ToolCall
from agents.runtime.context import Summarize, fit
from agents.runtime.guardrails import Guardrails, Judge, Tripped, load_callable
from agents.runtime.hooks import (
    HookContext,
    Hooks,
    ModelRequest,
    Veto,
    apply_rules,
    call_hook,
)
from agents.runtime.invocation import Invocation
from agents.runtime.model_calls import ModelCaller
from agents.runtime.reporting import Reporter
from agents.tools.base import ToolOutput
from tracing import attributes as attr

__all__ = ["Steering"]


@dataclass
class Steering:
    """Guardrails, hooks and step rules of one agent, around its model and tool calls.

    Args:
        spec: the agent (its guardrails, hooks, step rules and context policy).
        caller: its model calls (the agent's model, other models, calls beside the steps).
        reporter: how an invocation ends (a tripped guardrail).
        schemas: the tools offered to the model, as sent (shared with the runtime, which adds
            to it).
        ledger: the run-wide record (the tokens left, for step rules that ask).
    """

    spec: AgentSpec
    caller: ModelCaller
    reporter: Reporter
    schemas: list[dict[str, Any]]
    ledger: Ledger | None = None
    guardrails: Guardrails = field(init=False)
    hooks: list[Hooks] = field(init=False)

    def __post_init__(self) -> None:
        self.guardrails = Guardrails(self.spec.guardrails)
        self.hooks = [load_callable(path)() for path in self.spec.hooks]

    def _hook_context(self, inv: Invocation) -> HookContext:
        return HookContext(
            agent=self.spec.name,
            run_id=inv.ctx.run_id,
            chain=inv.ctx.chain,
            step=inv.steps,
            usage=inv.usage,
            tools_called=tuple(inv.tools_called),
            thread_id=inv.ctx.thread_id,
            invocation=inv.id,
            state=self.reporter.live_state(inv),
        )

    async def hooks_call(self, inv: Invocation, method: str, *args: Any) -> list[Any]:
        """Every hook's `method`, in order (`HookFailed`, `Stopped` raised as they come)."""
        context = self._hook_context(inv)
        return [await call_hook(hook, method, context, *args) for hook in self.hooks]

    async def request(self, inv: Invocation, messages: list[dict[str, Any]]) -> ModelRequest:
        """The next model call: the agent's (fitted), then changed by step rules and hooks."""
        model = self.caller.model
        fitted = await fit(messages, self.spec.context, model, self._summarizer(inv))
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
        request = ModelRequest(model.model, list(fitted.messages), list(self.schemas))
        rules = self.spec.step_rules
        if rules:
            left = None
            if any(r.when.budget_below for r in rules) and self.ledger is not None:
                left = await self.ledger.tokens_left(inv.ctx.run_id)
            before = _request_shape(request)
            applied = apply_rules(rules, request, self._hook_context(inv), left)
            if applied:
                trace.get_current_span().add_event(
                    attr.EVENT_STEP_RULES, {"step": inv.steps, "rules": applied}
                )
                if changed := _changes(before, request):
                    rules_named = ", ".join(f"#{i + 1}" for i in applied)
                    self.steered(inv, f"step rules {rules_named}", changed)
        if self.hooks:
            before = _request_shape(request)
            await self.hooks_call(inv, "before_model", request)
            if changed := _changes(before, request):
                self.steered(inv, _names(self.hooks), changed)
        return request

    def steered(self, inv: Invocation, by: str, change: str) -> None:
        """Say that a hook or step rule changed the agent's course: an event, a span event."""
        step = inv.steps + 1 if "model call" in change else inv.steps  # (the call to be made)
        trace.get_current_span().add_event(
            attr.EVENT_STEERED, {"by": by, "change": change, "step": step}
        )
        self.reporter.emit(inv, Steered, by=by, change=change, step=step)

    async def after_model(self, inv: Invocation, reply: ModelReply) -> None:
        """The hooks' `after_model`."""
        if self.hooks:
            await self.hooks_call(inv, "after_model", reply)

    async def check_task(self, inv: Invocation) -> AgentResult | None:
        """The input guardrails on the task: how the invocation ends if one trips, else None.

        What the guardrail blocked goes nowhere: the result says what may be kept of the task
        (`AgentResult.input_kept`), for its span, its caller and the run's record.
        """
        task, screened = inv.delegation.task, inv.delegation.input_tripped
        tripped: Tripped | None = None
        if screened is not None:  # at the door: `task` is what it kept
            tripped = Tripped(screened["guardrail"], "input", screened["reason"], task)
        elif self.guardrails:
            tripped = await self.guardrails.check("input", task, self._judge(inv))
        if tripped is not None:
            result = self.tripped(inv, tripped)
            result.input_kept = tripped.kept
            return result
        return None

    @property
    def screens_answers(self) -> bool:
        """Whether the agent has output guardrails (`screen_answer`)."""
        return bool(self.guardrails.spec.output)

    async def screen_answer(self, inv: Invocation, text: str) -> Tripped | None:
        """The output guardrails on a final answer, before it is recorded anywhere."""
        return await self.guardrails.check("output", text, self._judge(inv))

    def tripped(self, inv: Invocation, tripped: Tripped) -> AgentResult:
        """How an invocation ends when a guardrail trips (noted on the current span)."""
        _note_trip(tripped)
        return self.reporter.end(inv, RunStatus.GUARDRAIL_TRIPPED, error=str(tripped))

    async def tool_call(
        self, inv: Invocation, call: ToolCall, run: Callable[[], Awaitable[ToolOutput]]
    ) -> ToolOutput:
        """A tool call (`run`) between its guardrails and hooks: arguments first, result after."""
        inv.tools_called.append(call.name)
        guarded, judge = bool(self.guardrails.spec.tools), self._judge(inv)
        if guarded:
            _, tripped = await self.guardrails.tool(call.name, "arguments", call.arguments, judge)
            if tripped is not None:
                _note_trip(tripped)
                return ToolOutput(f"error: {tripped}", is_error=True)
        if self.hooks:
            said = await self.hooks_call(inv, "before_tool", call.name, _parsed(call.arguments))
            for hook, answer in zip(self.hooks, said, strict=True):
                if isinstance(answer, Veto):
                    trace.get_current_span().add_event(
                        attr.EVENT_HOOK_VETO, {"hook": type(hook).__name__, "reason": answer.reason}
                    )
                    who = type(hook).__name__
                    self.steered(inv, who, f"vetoed {call.name}: {answer.reason}")
                    return ToolOutput(f"error: vetoed by {who}: {answer.reason}", is_error=True)
        out = await run()
        content = out.content
        if guarded:
            content, tripped = await self.guardrails.tool(call.name, "result", content, judge)
            if tripped is not None:
                _note_trip(tripped)
                return ToolOutput(f"error: {tripped}", is_error=True, child=out.child)
        if self.hooks:
            for hook, answer in zip(
                self.hooks,
                await self.hooks_call(inv, "after_tool", call.name, content),
                strict=True,
            ):
                if isinstance(answer, str) and answer != content:
                    self.steered(inv, type(hook).__name__, f"replaced the result of {call.name}")
                    content = answer
        return dataclasses.replace(out, content=content)

    def _other_model(self, chosen: str | dict[str, Any]) -> ModelClient | None:
        models = self.caller.models
        if models is None:
            return None
        return models(
            ModelSpec.model_validate({"name": chosen} if isinstance(chosen, str) else chosen)
        )

    def _summarizer(self, inv: Invocation) -> Summarize:
        chosen = self.spec.context.model
        model = (self._other_model(chosen) if chosen is not None else None) or self.caller.model

        async def summarize(messages: list[dict[str, Any]]) -> str:
            said = await self.caller.side_call(inv, model, _SUMMARIZE, _transcript(messages))
            return said or "(nothing to summarize)"

        return summarize

    def _judge(self, inv: Invocation) -> Judge:
        """Asks a guardrail's judge model (its own span; its tokens count for the run)."""

        async def ask(judge: JudgeSpec, text: str) -> str | None:
            model = self._other_model(judge.model)
            if model is None:
                return "no model client for the judge here"
            system = f"{judge.instructions}\n\nAnswer PASS if the text passes, else FAIL: why."
            said = await self.caller.side_call(inv, model, system, text)
            return None if said.upper().startswith("PASS") else said.removeprefix("FAIL:").strip()

        return ask


def _request_shape(request: ModelRequest) -> tuple[Any, ...]:
    """What of a model call a hook or rule may change, to tell whether one did."""
    return (
        request.model,
        request.force_tool,
        tuple(t.get("function", {}).get("name") for t in request.tools),
        len(request.messages),
        hash(json.dumps(request.messages, sort_keys=True, default=str)),
    )


def _changes(before: tuple[Any, ...], request: ModelRequest) -> str | None:
    """What changed in the model call, in words (None: nothing)."""
    model, forced, tools, count, _ = before
    after = _request_shape(request)
    if after == before:
        return None
    said = []
    if request.force_tool != forced and request.force_tool:
        said.append(f"forced {request.force_tool}")
    if request.model != model:
        said.append(f"switched the model to {request.model}")
    if after[2] != tools:
        said.append("changed the tools offered")
    if after[3:] != (count, before[4]):
        said.append("changed the messages")
    return f"{', '.join(said) or 'changed'} on the next model call"


def _names(hooks: list[Hooks]) -> str:
    return ", ".join(type(h).__name__ for h in hooks)


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
