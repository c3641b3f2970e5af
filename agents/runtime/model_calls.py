"""The model half of the tool loop: one model step, asked or taken from the run's record.

A run submitted with `stream` asks the model to stream; its text goes to followers as
`model_delta` events while the reply comes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from agents.core.errors import describe_error
from agents.core.events import ModelFinished, ModelStarted
from agents.core.messages import AgentResult, RunStatus, Usage
from agents.core.ports import Ledger
from agents.core.spec import AgentSpec, ModelSpec
from agents.core.steps import model_key, request_fingerprint
from agents.models.base import ModelClient, ModelReply
from agents.runtime.deltas import Deltas
from agents.runtime.guardrails import Tripped
from agents.runtime.hooks import ModelRequest
from agents.runtime.invocation import Invocation
from agents.runtime.replay import blocked_of, reply_data, reply_of
from agents.runtime.reporting import Reporter
from tracing import attributes as attr
from tracing import chat_span, genai, set_outcome, span_ids

__all__ = ["ModelCaller", "Screen"]

# What checks a model's final answer before it is recorded (the output guardrails).
Screen = Callable[[Invocation, str], Awaitable[Tripped | None]]

# How early by the wall clock a timed wait may end (event loops tick in milliseconds).
_TIMER_SLACK_S = 0.05


@dataclass
class ModelCaller:
    """Makes one agent's model calls: its steps, and calls beside them (judges, summaries).

    Args:
        spec: the agent.
        model: the agent's model client.
        reporter: where events, steps and span contents go.
        ledger: the run-wide record (the token budget is charged after each call).
        models: makes a client for another model (a step rule's or a hook's choice).
        output_format: the answer's shape, for models that take one natively.
    """

    spec: AgentSpec
    model: ModelClient
    reporter: Reporter
    ledger: Ledger | None = None
    models: Callable[[ModelSpec], ModelClient] | None = None
    output_format: dict[str, Any] | None = None
    # Other models' clients (rules, hooks), made once each.
    _clients: dict[tuple[str, str], ModelClient] = field(default_factory=dict, init=False)

    def client(self, request: ModelRequest) -> ModelClient:
        """The client of the request's model (the agent's own, unless a rule or hook chose)."""
        if request.model == self.model.model and not request.params:
            return self.model
        key = (request.model, repr(sorted(request.params.items())))
        if key not in self._clients:
            if self.models is None:
                raise RuntimeError(f"no model client for {request.model} here")
            self._clients[key] = self.models(ModelSpec(name=request.model, params=request.params))
        return self._clients[key]

    async def call(
        self, inv: Invocation, request: ModelRequest, screen: Screen | None = None
    ) -> ModelReply | AgentResult:
        """One model step: the reply, taken from the record or asked now, or how it ended.

        `screen`: the output guardrails, asked about a final answer before it is recorded
        anywhere (the step log, the span): one that trips leaves only what it keeps of the
        answer, and says so in `inv.blocked`.
        """
        ctx = inv.ctx
        key = model_key(inv.steps)
        messages, model = request.messages, self.client(request)
        fingerprint = ""
        if self.reporter.logs_steps(inv):
            fingerprint = request_fingerprint(model.model, messages, request.tools)
        recorded = inv.recorded.model(key, fingerprint) if inv.recorded.loaded else None
        if recorded is None and ctx.replay_only:
            return self.reporter.end(
                inv,
                RunStatus.FAILED,
                error=f"replay: the record has no reply to this request ({key} of "
                f"{self.spec.name}: the run ended before it, or the request differs)",
            )
        with _chat_span(model) as span:
            if fingerprint:
                span.set_attribute(attr.BATON_STEP, f"{inv.id}/{key}")
            if recorded is not None:  # answered before this run was interrupted: reuse it
                reply = reply_of(recorded)
                inv.blocked = blocked_of(recorded)
                span.set_attribute(attr.BATON_REPLAYED, True)
            else:
                self.reporter.emit(
                    inv, ModelStarted, model=model.model, step=inv.steps, **span_ids(span)
                )
                reply_or_stop = await self._ask(inv, request, model, span)
                if isinstance(reply_or_stop, AgentResult):
                    return reply_or_stop
                reply = reply_or_stop
                if screen is not None and reply.content and not reply.tool_calls:
                    inv.blocked = await screen(inv, reply.content)
                    if inv.blocked is not None:
                        reply = dataclasses.replace(reply, content=inv.blocked.kept)
                if fingerprint:
                    data = reply_data(reply, fingerprint, inv.blocked)
                    self.reporter.record(inv, key, "model", data)
            span.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, reply.input_tokens)
            span.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, reply.output_tokens)
            if reply.finish_reason:
                span.set_attribute(attr.GEN_AI_RESPONSE_FINISH_REASONS, [reply.finish_reason])
            if reply.response_model:
                span.set_attribute(attr.GEN_AI_RESPONSE_MODEL, reply.response_model)
            if reply.cost_usd is not None:
                span.set_attribute(attr.BATON_USAGE_COST, reply.cost_usd)
            if self.reporter.capturing(span):
                output = genai.output_messages(reply.as_message(), reply.finish_reason)
                self.reporter.content(span, attr.GEN_AI_OUTPUT_MESSAGES, output)
            set_outcome(span, None)
        self.spent(inv, reply)
        if recorded is None:
            self.reporter.emit(
                inv,
                ModelFinished,
                model=model.model,
                step=inv.steps,
                tool_calls=len(reply.tool_calls),
                tokens=reply.input_tokens + reply.output_tokens,
                input_tokens=reply.input_tokens,
                output_tokens=reply.output_tokens,
                cost_usd=reply.cost_usd,
                answered_by=reply.fallback,
                gate_wait_s=round(reply.gate_wait_s, 3),
                **span_ids(span),
            )
            if inv.ctx.capped:  # counted against the caps now, not at the next batch's time
                self.reporter.flush(inv)
        self.reporter.send_finished_spans(inv)
        return reply

    def spent(self, inv: Invocation, reply: ModelReply) -> None:
        """Count a model call in the invocation's usage and the run's token budget."""
        inv.usage = inv.usage + Usage(
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            model_calls=1,
            cost_usd=reply.cost_usd or 0.0,
            unpriced_calls=int(reply.cost_usd is None),
        )
        if inv.ctx.limits.token_budget is not None and self.ledger is not None:
            tokens = reply.input_tokens + reply.output_tokens
            self.ledger.charge(inv.ctx.run_id, tokens, f"{inv.id}/{inv.usage.model_calls}")

    async def _ask(
        self, inv: Invocation, request: ModelRequest, model: ModelClient, span: Any
    ) -> ModelReply | AgentResult:
        ctx = inv.ctx
        left = ctx.time_left()
        timeout = min(self.spec.timeouts.model, left)
        # Whether the run's deadline sets this wait: then its end is the deadline's, even when
        # the loop's timer fires a little early by the wall clock (uvloop's ticks are 1 ms).
        by_deadline = left <= self.spec.timeouts.model
        messages = request.messages
        # The whole conversation, converted at every call: only when contents are recorded.
        if self.reporter.capturing(span):
            content = self.reporter.content
            content(span, attr.GEN_AI_INPUT_MESSAGES, genai.input_messages(messages))
            if request.tools:
                content(span, attr.GEN_AI_TOOL_DEFINITIONS, genai.tool_definitions(request.tools))
        deltas = self._deltas(inv, span) if ctx.stream else None
        try:
            async with asyncio.timeout(timeout):  # not wait_for: see agents/runtime/tool_runner.py
                return await model.complete(
                    messages,
                    request.tools,
                    deltas.add if deltas else None,
                    self.output_format,
                    request.force_tool,
                )
        except TimeoutError:
            set_outcome(span, "timeout", "timeout")
            if ctx.time_left() <= (_TIMER_SLACK_S if by_deadline else 0):
                return self.reporter.end(
                    inv,
                    RunStatus.LIMIT_EXCEEDED,
                    error=f"run deadline ({ctx.limits.deadline_s:g}s) passed during a model call",
                )
            return self.reporter.end(
                inv, RunStatus.FAILED, error=f"model call timed out after {timeout:.1f}s"
            )
        except Exception as exc:
            set_outcome(span, describe_error(exc), type(exc).__name__)
            return self.reporter.end(
                inv, RunStatus.FAILED, error=f"model call failed: {describe_error(exc)}"
            )
        finally:
            if deltas is not None:
                deltas.close()

    def _deltas(self, inv: Invocation, span: Any) -> Deltas:
        """Where a streamed reply's text goes: `model_delta` events (unnumbered, not stored)."""
        ids, step = span_ids(span), inv.steps
        return Deltas(lambda text: self.reporter.delta(inv, step, text, **ids))

    async def side_call(self, inv: Invocation, model: ModelClient, system: str, text: str) -> str:
        """A model call beside the steps (a judge, a summary): own span, tokens counted."""
        with _chat_span(model) as span:
            reply = await model.complete(
                [{"role": "system", "content": system}, {"role": "user", "content": text}], []
            )
            span.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, reply.input_tokens)
            span.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, reply.output_tokens)
        self.spent(inv, reply)
        return (reply.content or "").strip()


def _chat_span(model: ModelClient) -> AbstractContextManager[Any]:
    """A model call's span, saying who answers as the GenAI conventions name it."""
    who = model.identity
    return chat_span(model.model, model=who.model, provider=who.provider, server=who.server)
