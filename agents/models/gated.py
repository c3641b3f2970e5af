"""A model behind the cluster's provider gates, with its fallbacks.

Each attempt takes a lease from the gate of the model it asks (`agents.core.ports.Gates`), so
every replica and node keeps to one limit. A provider's refusal for load is asked again after
its `Retry-After` (during which the whole gate pauses) or a jittered backoff, up to the gate's
`retries`; then, or when the gate would hold the call past its `max_wait_s`, the next fallback
is asked, as litellm's Router does. A wait is a `baton.gate.wait` span; retries and fallbacks
are events on the model call's span, and the model that answered is on the reply.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from typing_extensions import override

from agents.core.errors import describe_error
from agents.core.gate_spec import GateSpec, gate_for
from agents.core.ports import Gates
from agents.core.spec import ModelSpec
from agents.models.base import ModelClient, ModelIdentity, ModelReply, TextSink
from tracing import attributes as attr
from tracing import gate_wait_span

__all__ = ["GatedModel", "ModelMaker", "NoModelAnswered"]

# The longest a backoff grows to, whatever the retries.
_MAX_BACKOFF_S = 30.0
# A wait shorter than this is not worth a span (the gate's own round trip).
_WAIT_WORTH_A_SPAN_S = 0.005


class NoModelAnswered(Exception):
    """Every model of the call (the asked one and its fallbacks) refused or failed."""


@dataclass
class _Candidate:
    client: ModelClient
    gate: GateSpec | None
    max_tokens: int = 0  # the reply tokens its calls ask for at most (counted by a token gate)


@dataclass
class GatedModel(ModelClient):
    """The model of `spec` and its fallbacks, each behind its gate (see the module's docstring).

    Args:
        spec: the model asked first; its `fallbacks` follow in order.
        make: makes the plain client of one model.
        gates: the cluster's gates (None: no gate holds, fallbacks still apply).
        specs: the gates' declarations, to know which models go through one.
        hold_s: the longest one call may last (a lease not given back is freed after it).
    """

    spec: ModelSpec
    make: Callable[[ModelSpec], ModelClient]
    gates: Gates | None
    specs: tuple[GateSpec, ...]
    hold_s: float = 120.0
    _candidates: list[_Candidate] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.model = self.spec.name
        for model in self.spec.every():
            gate = gate_for(self.specs, model.name) if self.gates is not None else None
            if gate is not None and "max_retries" not in model.params:
                # Every attempt passes the gate: none is made inside the provider's SDK.
                model = model.model_copy(update={"params": {**model.params, "max_retries": 0}})
            self._candidates.append(_Candidate(self.make(model), gate, _max_tokens(model)))

    @property
    def _first(self) -> ModelClient:
        return self._candidates[0].client

    @property
    @override
    def identity(self) -> ModelIdentity:
        return self._first.identity

    @override
    def count_tokens(self, messages: list[dict[str, Any]]) -> int:
        return self._first.count_tokens(messages)

    @override
    def context_window(self) -> int | None:
        return self._first.context_window()

    @override
    def supports_json_schema(self) -> bool:
        return all(c.client.supports_json_schema() for c in self._candidates)

    @override
    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_text: TextSink | None = None,
        response_format: dict[str, Any] | None = None,
        force_tool: str | None = None,
    ) -> ModelReply:
        span = trace.get_current_span()
        reasons: list[str] = []
        waited, outcome = 0.0, ""
        for i, candidate in enumerate(self._candidates):
            client = candidate.client
            if i > 0:
                span.add_event(
                    attr.EVENT_MODEL_FALLBACK,
                    {"from": self._candidates[i - 1].client.model, "to": client.model,
                     "reason": outcome[:500]},
                )  # fmt: skip
            answer, wait = await self._attempts(
                candidate, messages, tools, on_text, response_format, force_tool
            )
            waited += wait
            if isinstance(answer, ModelReply):
                answer.gate_wait_s = waited
                if i > 0:
                    answer.fallback = client.model
                    span.set_attribute(attr.BATON_MODEL_USED, client.model)
                return answer
            outcome = answer
            reasons.append(f"{client.model}: {outcome}")
        raise NoModelAnswered("; ".join(reasons))

    async def _attempts(
        self,
        candidate: _Candidate,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_text: TextSink | None,
        response_format: dict[str, Any] | None,
        force_tool: str | None,
    ) -> tuple[ModelReply | str, float]:
        """One model's answer, asked again while the provider is busy; else why not."""
        client, gate = candidate.client, candidate.gate
        # Without a gate, a busy model goes straight on to the next fallback.
        retries = gate.retries if gate is not None else 0
        waited = 0.0
        for attempt in range(retries + 1):
            lease = None
            if gate is not None:
                lease, wait, why = await self._lease(candidate, messages)
                waited += wait
                if lease is None:
                    return f"gate {gate.label} closed: {why}", waited
            try:
                reply = await client.complete(messages, tools, on_text, response_format, force_tool)
            except Exception as exc:
                busy = client.busy(exc)
                if lease is not None:
                    assert self.gates is not None
                    self.gates.release(lease, None)
                if busy is None:
                    raise  # a wrong request fails the same way elsewhere: no fallback
                said = busy.retry_after_s
                if gate is not None and said:
                    assert self.gates is not None
                    self.gates.pause(gate.label, said, f"{client.model}: Retry-After {said:g}s")
                if attempt == retries:
                    return describe_error(exc), waited
                backoff = min(gate.backoff_s * 2**attempt, _MAX_BACKOFF_S) if gate else 0.0
                delay = said if said is not None else backoff * random.uniform(0.5, 1.5)
                trace.get_current_span().add_event(
                    attr.EVENT_MODEL_RETRY,
                    {"model": client.model, "attempt": attempt + 1, "delay_s": round(delay, 3),
                     "error": describe_error(exc)[:500]},
                )  # fmt: skip
                # With a Retry-After, the gate's pause holds every caller; this one too.
                if said is None or gate is None:
                    await asyncio.sleep(delay)
                continue
            if lease is not None:
                assert self.gates is not None
                self.gates.release(lease, reply.input_tokens + reply.output_tokens)
            return reply, waited
        raise AssertionError("unreachable")

    async def _lease(
        self, candidate: _Candidate, messages: list[dict[str, Any]]
    ) -> tuple[str | None, float, str]:
        """A lease on the model's gate (a wait is recorded as a span)."""
        gate = candidate.gate
        assert self.gates is not None and gate is not None
        tokens = 1
        if gate.tokens is not None:  # counting is paid only where tokens are limited
            tokens = candidate.client.count_tokens(messages) + candidate.max_tokens
        started = time.time_ns()
        lease, waited, why = await self.gates.take(gate.label, tokens, self.hold_s, gate.max_wait_s)
        if waited >= _WAIT_WORTH_A_SPAN_S or lease is None:
            gate_wait_span(gate.label, started, waited, why, passed=lease is not None)
        return lease, waited, why


def _max_tokens(model: ModelSpec) -> int:
    """The reply tokens a model's calls ask for at most (`max_tokens` in its params), else 0."""
    value = model.params.get("max_tokens") or model.params.get("max_completion_tokens") or 0
    return int(value) if isinstance(value, int) else 0


@dataclass
class ModelMaker:
    """Makes an agent's model clients: plain, or gated with fallbacks where the config says.

    Args:
        make: makes the plain client of one model (`LiteLLMClient`).
        gates: the cluster's gates (None: none here).
        specs: the gates' declarations.
        hold_s: the longest one call may last.
    """

    make: Callable[[ModelSpec], ModelClient]
    gates: Gates | None = None
    specs: tuple[GateSpec, ...] = ()
    hold_s: float = 120.0

    def __call__(self, spec: ModelSpec) -> ModelClient:
        """The client of `spec`: gated when a gate holds it or one of its fallbacks."""
        gated = self.gates is not None and any(gate_for(self.specs, m.name) for m in spec.every())
        if not gated and not spec.fallbacks:
            return self.make(spec)
        return GatedModel(spec, self.make, self.gates, self.specs, self.hold_s)
