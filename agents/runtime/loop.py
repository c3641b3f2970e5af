"""The tool loop: model call, tool calls, model call... until a final answer or a limit.

Tool calls run concurrently, bounded. Plain async code: it knows nothing of Ray, so it runs in
tests as it is.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from agents.core.events import (
    AgentFinished,
    AgentStarted,
)
from agents.core.limits import TraceOptions
from agents.core.messages import AgentResult, Delegation, RunStatus
from agents.core.ports import Approvals, EventSink, Ledger, SpanSource
from agents.core.spec import AgentSpec, ModelSpec
from agents.core.steps import Journal, model_key
from agents.models.base import (
    BUILTIN_PREFIX,
    CHANGES_STATE,
    ModelClient,
    tool_schema,
)
from agents.runtime.calls import Invocation
from agents.runtime.guardrails import Guardrails, load_callable
from agents.runtime.hooks import HookFailed, Stopped
from agents.runtime.steering import Steering
from agents.runtime.structured import OutputContract
from agents.tools.base import Tool
from tracing import (
    Redactor,
    agent_span,
    extract_context,
    genai,
    set_outcome,
    span_ids,
)
from tracing import attributes as attr

__all__ = ["AgentRuntime"]

logger = logging.getLogger(__name__)


@dataclass
class AgentRuntime(Steering):
    """Runs one agent's invocations.

    Args:
        spec: the agent.
        model: the model client.
        tools: the tools offered to the model.
        hidden_tools: tools callable by name but not offered (delegations the topology forbids,
            kept so that a model naming one gets a clear refusal instead of "unknown tool").
        ledger: the run-wide token budget; None when no run has a budget.
        events: where progress events go.
        span_source: this process's span collector; an invocation's finished spans go to the
            event sink with its last events.
        actor_id: which worker this is, for results and spans.
        trace_options: what spans record (message contents are opt-in).
        redactor: scrubs secrets from results and events (spans are scrubbed by the collector).
        approvals: where calls marked `confirm` wait for a person (None: they are not run).
        journal: the run's step log (used when the run asks for it: `RunContext.journal`).
        models: makes a client for another model (a guardrail's judge).
    """

    spec: AgentSpec
    model: ModelClient
    tools: Sequence[Tool] = ()
    hidden_tools: Mapping[str, Tool] = field(default_factory=dict)
    ledger: Ledger | None = None
    events: EventSink | None = None
    span_source: SpanSource | None = None
    actor_id: str = "local"
    trace_options: TraceOptions = field(default_factory=TraceOptions)
    redactor: Redactor = field(default_factory=Redactor)
    approvals: Approvals | None = None
    journal: Journal | None = None
    models: Callable[[ModelSpec], ModelClient] | None = None

    def __post_init__(self) -> None:
        self._by_name: dict[str, Tool] = {**self.hidden_tools, **{t.name: t for t in self.tools}}
        self._schemas = [self._schema(t) for t in self.tools]
        self._contract = (
            OutputContract.of(self.spec, self.model.supports_json_schema())
            if self.spec.output_schema is not None
            else None
        )
        self._guardrails = Guardrails(self.spec.guardrails)
        self._hooks = [load_callable(path)() for path in self.spec.hooks]
        self._clients = {}
        self._output_format = self._contract.response_format() if self._contract else None

    def tool_names(self) -> set[str]:
        """Every name a model may call, hidden delegations included."""
        return set(self._by_name)

    def add_tools(self, tools: Sequence[Tool]) -> None:
        """Offer more tools (found after start, such as an MCP server's); names must be new."""
        for tool in tools:
            if tool.name in self._by_name:
                raise ValueError(f"tool name {tool.name!r} is taken")
            self._by_name[tool.name] = tool
            self._schemas.append(self._schema(tool))

    def _schema(self, tool: Tool) -> dict[str, Any]:
        schema = tool_schema(tool.name, tool.description, tool.parameters)
        # Only the built-in models (in this process) hear that a tool changes things.
        if getattr(tool, "changes_state", False) and self.model.model.startswith(BUILTIN_PREFIX):
            schema["function"][CHANGES_STATE] = True
        return schema

    async def invoke(
        self, delegation: Delegation, *, flush: bool = True, hand_back: bool = False
    ) -> AgentResult:
        """Run the tool loop for one delegation and report how it ended.

        Args:
            delegation: the task and the run it belongs to.
            flush: send the buffered events and spans before returning, so that they arrive
                before the result in another process. A caller in this same process (an
                agent host) passes False: its own end, or the batch timer, sends them.
            hand_back: the caller is an agent in another process: instead of a flush, what is
                queued for the run travels in the result (`AgentResult.handed_over`) and the
                caller's process sends it with its own.
        """
        ctx = delegation.context
        inv = Invocation(delegation, self.spec.max_steps or ctx.limits.max_steps)
        if delegation.invocation:
            inv.id = delegation.invocation
        ids: dict[str, Any] = {}
        if ctx.depth <= 1 and self.events is not None and self.span_source is not None:
            self.events.remember(ctx.run_id)  # see `_ship_spans`
        try:
            with agent_span(
                self.spec.name,
                self.actor_id,
                ctx.run_id,
                ctx.chain,
                extract_context(ctx.trace_context),
            ) as span:
                inv.trace_id = span.get_span_context().trace_id
                ids = span_ids(span)
                self._emit(
                    inv,
                    AgentStarted,
                    call_id=delegation.call_id,
                    caller=delegation.caller,
                    **ids,
                )
                task = delegation.task
                self._content(span, attr.GEN_AI_INPUT_MESSAGES, genai.text_messages("user", task))
                self._content(span, attr.INPUT_VALUE, task)
                if self.spec.instructions:
                    instructions = genai.system_instructions(self.spec.instructions)
                    self._content(span, attr.GEN_AI_SYSTEM_INSTRUCTIONS, instructions)
                if ctx.epoch:
                    span.set_attribute(attr.BATON_RUN_EPOCH, ctx.epoch)
                if self._journaled(inv):
                    span.set_attribute(attr.BATON_STEP, f"{inv.id}/{model_key(1)}")
                try:
                    if self._journaled(inv) and (delegation.replay or ctx.epoch):
                        assert self.journal is not None
                        inv.record.steps = await self.journal.recorded(ctx.run_id, inv.id)
                        inv.record.loaded = True
                    result = await self._loop(inv)
                except Exception as exc:  # a bug or an unexpected library error: report
                    result = self._end(inv, RunStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
                total = result.usage
                span.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, total.input_tokens)
                span.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, total.output_tokens)
                span.set_attribute(attr.BATON_USAGE_COST, total.cost_usd)
                if result.output is not None:
                    answer = genai.text_messages("assistant", result.output, "stop")
                    self._content(span, attr.GEN_AI_OUTPUT_MESSAGES, answer)
                    self._content(span, attr.OUTPUT_VALUE, result.output)
                if result.status == RunStatus.SUCCEEDED:
                    set_outcome(span, None)
                else:
                    set_outcome(span, result.error or result.status.value, result.status.value)
        except asyncio.CancelledError:
            self._ship_spans(inv, None, flush=True)
            raise
        self._emit(
            inv,
            AgentFinished,
            call_id=delegation.call_id,
            status=result.status,
            duration_s=result.duration_s,
            steps=result.steps,
            error=result.error,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            **ids,
        )
        self._ship_spans(inv, result, flush, hand_back)
        return result

    def _ship_spans(
        self, inv: Invocation, result: AgentResult | None, flush: bool, hand_back: bool = False
    ) -> None:
        """Hand this invocation's finished spans on before its result (or cancellation) does.

        Nothing stays buffered in a process that may die. The entry agent's travel in its result
        (with copies of those sent after each step); a sub-agent's go to the ledger with its last
        events. The result also says how many events of the run this process has sent, so that
        the ledger closes the run only once they are all in.
        """
        ctx = inv.ctx
        spans = self.span_source.drain(inv.trace_id) if self.span_source is not None else []
        copies: list[dict[str, Any]] = []
        if ctx.depth <= 1 and self.events is not None and self.span_source is not None:
            copies = self.events.recall(ctx.run_id)
        if result is not None and ctx.depth <= 1:
            result.spans = spans
            # What went to the ledger from here, so that a run that stayed in this process
            # needs no round trip to collect it.
            result.shipped_spans = copies
            if self.span_source is not None and self.events is not None:
                shipped = self.events.shipped(ctx.run_id)
                if shipped[1]:  # spans went out as steps ended (`_send_finished_spans`)
                    result.spans_sent = shipped
        elif self.events is not None:
            self.events.keep_spans(ctx.run_id, spans)
        if self.events is None:
            return
        if result is not None and hand_back and flush:
            result.handed_over = self.events.hand_over(ctx.run_id)
            flush = False
        if result is not None and self.span_source is not None:
            # The ledger closes the run once it has every process's events.
            result.events_sent = self.events.emitted(ctx.run_id)
        if flush:
            self.events.flush()

    async def _loop(self, inv: Invocation) -> AgentResult:
        """The steps, between the hooks' start and end (a hook's failure fails the invocation)."""
        try:
            if self._hooks:
                await self._hooks_call(inv, "on_start", inv.delegation.task)
            result = await self._steps(inv)
        except (HookFailed, Stopped) as exc:
            result = self._end(inv, RunStatus.FAILED, error=str(exc))
            result.stops_run = isinstance(exc, Stopped) and exc.run
        if self._hooks:
            try:
                await self._hooks_call(inv, "on_end", result)
            except (HookFailed, Stopped) as exc:
                result = self._end(inv, RunStatus.FAILED, error=str(exc))
        return result

    async def _steps(self, inv: Invocation) -> AgentResult:
        messages: list[dict[str, Any]] = []
        contract = self._contract
        system = [self.spec.instructions, contract.instructions() if contract else ""]
        if any(system):
            messages.append({"role": "system", "content": "\n\n".join(filter(None, system))})
        # Handed over: the conversation so far goes on here; else the task starts one.
        messages += inv.delegation.history or [{"role": "user", "content": inv.delegation.task}]
        sent_back = 0  # answers that did not match the output schema
        if self._guardrails:
            tripped = await self._guardrails.check("input", inv.delegation.task, self._judge(inv))
            if tripped is not None:
                return self._tripped(inv, tripped)
        while inv.steps < inv.max_steps:
            stop = await self._check_limits(inv)
            if stop is not None:
                return stop
            inv.steps += 1
            reply_or_stop = await self._call_model(inv, await self._request(inv, messages))
            if isinstance(reply_or_stop, AgentResult):
                return reply_or_stop
            reply = reply_or_stop
            await self._after_model(inv, reply)
            if not reply.tool_calls:
                output, problem = reply.content or "", None
                if contract is not None:
                    value, problem = contract.check(output)
                    output = json.dumps(value) if problem is None else output
                if problem is None:
                    return await self._answer(inv, output)
                assert contract is not None
                trace.get_current_span().add_event(
                    attr.EVENT_OUTPUT_INVALID, {"problem": problem[:500], "try": sent_back + 1}
                )
                if sent_back >= contract.retries:
                    return self._end(
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
            outputs = await self._run_tools(inv, reply.tool_calls)
            for call, out in zip(reply.tool_calls, outputs, strict=True):
                messages.append({"role": "tool", "tool_call_id": call.id, "content": out.content})
                if out.child is not None:
                    inv.children.append(out.child)
            ended = next((o.child for o in outputs if o.child and o.child.stops_run), None)
            if ended is not None:  # a hook below ended the whole run: so does this invocation
                result = self._end(inv, ended.status, error=ended.error)
                result.stops_run = True
                return result
            took_over = next((o.child for o in outputs if o.handoff and o.child), None)
            if took_over is not None:  # handed over: the receiver's answer is this one's
                result = self._end(
                    inv, took_over.status, output=took_over.output, error=took_over.error
                )
                result.answered_by = took_over.answered_by or took_over.agent
                return result
        return self._end(
            inv,
            RunStatus.LIMIT_EXCEEDED,
            error=f"max_steps {inv.max_steps} reached without a final answer",
        )

    async def _check_limits(self, inv: Invocation) -> AgentResult | None:
        ctx = inv.ctx
        if ctx.time_left() <= 0:
            return self._end(
                inv,
                RunStatus.LIMIT_EXCEEDED,
                error=f"run deadline ({ctx.limits.deadline_s:g}s) passed after {inv.steps} steps",
            )
        if ctx.limits.token_budget is not None and self.ledger is not None:
            left = await self.ledger.tokens_left(ctx.run_id)
            if left is not None and left <= 0:
                return self._end(
                    inv,
                    RunStatus.BUDGET_EXCEEDED,
                    error=f"token budget {ctx.limits.token_budget} spent after {inv.steps} steps",
                )
        return None
