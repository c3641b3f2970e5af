"""What an agent's invocations tell the rest of the system as they go.

Progress events (to the run's followers), steps (to the run's step log), captured contents (on
spans, opt-in), finished spans (with the events, after each step, so that a process that dies
keeps nothing), and the result each invocation ends with. Everything passes the agent's
redactor on its way out: no secret reaches an event, a step or a result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from opentelemetry import trace

from agents.core.events import Event, EventBase, ModelDelta, StateChanged
from agents.core.limits import TraceOptions
from agents.core.messages import AgentResult, RunStatus
from agents.core.ports import EventSink, SpanSource
from agents.core.state import State, StateChange
from agents.core.steps import Step, StepKind, StepLog
from agents.runtime.invocation import Invocation
from agents.tools.base import ToolOutput
from tracing import Redactor, record_content
from tracing import attributes as attr

__all__ = ["Reporter"]

_E = TypeVar("_E", bound=EventBase)


@dataclass
class Reporter:
    """Events, steps, span contents and results of one agent's invocations.

    Args:
        agent: the agent's name, on every event and result.
        actor_id: which worker runs it (on results).
        events: where progress events and finished spans go (None: nowhere).
        span_source: this process's span collector (None: spans are not shipped).
        step_log: the run's step log (used when the run asks for it: `RunContext.step_log`).
        trace_options: what spans record (message contents are opt-in).
        redactor: scrubs secrets from events, steps and results.
    """

    agent: str
    actor_id: str = "local"
    events: EventSink | None = None
    span_source: SpanSource | None = None
    step_log: StepLog | None = None
    trace_options: TraceOptions = field(default_factory=TraceOptions)
    redactor: Redactor = field(default_factory=Redactor)

    def event(self, inv: Invocation, kind: type[_E], **data: Any) -> _E:
        """The invocation's next event of `kind` (numbered, redacted), not yet emitted."""
        inv.seq += 1
        return kind(
            agent=self.agent,
            chain=list(inv.ctx.chain),
            invocation=inv.id,
            seq=inv.seq,
            **self.redactor.value(data),
        )

    def emit(self, inv: Invocation, kind: type[EventBase], **data: Any) -> None:
        """Emit the invocation's next event of `kind` (fire and forget)."""
        if self.events is not None:
            self.events.emit(inv.ctx.run_id, cast("Event", self.event(inv, kind, **data)))

    def merge(self, inv: Invocation, out: ToolOutput) -> None:
        """A call's writes to the shared state: its own (said), then its sub-run's."""
        self.wrote(inv, out.changes)
        if out.child is not None:
            inv.apply(out.child.state_changes)

    def live_state(self, inv: Invocation) -> State:
        """The shared state as a hook or workflow of this agent sees it.

        Its writes apply to the invocation at once, said as `wrote` says them.
        """
        return inv.state_view(self.agent, on_write=lambda change: self.wrote(inv, [change]))

    def wrote(self, inv: Invocation, changes: list[StateChange]) -> None:
        """Apply this agent's own writes to the shared state, and say so: an event, a span event.

        (Writes of the invocations under it are applied by `Invocation.apply` alone: theirs
        said so where they were made.)
        """
        if not changes:
            return
        inv.apply(changes)
        keys = list(dict.fromkeys(c.key for c in changes))
        step = inv.steps + 1  # (drawn before the step that follows them)
        trace.get_current_span().add_event(
            attr.EVENT_STATE_CHANGED, {"keys": keys, "by": self.agent, "step": step}
        )
        now = {key: inv.state.get(key) for key in keys}
        self.emit(inv, StateChanged, keys=keys, state=now, step=step)

    def delta(self, inv: Invocation, step: int, text: str, **ids: Any) -> None:
        """Streamed text of a model step: a `model_delta` event (unnumbered, not stored)."""
        if self.events is not None:
            delta = ModelDelta(
                agent=self.agent,
                chain=list(inv.ctx.chain),
                invocation=inv.id,
                step=step,
                text=self.redactor.text(text),
                **ids,
            )
            self.events.emit(inv.ctx.run_id, delta)

    def logs_steps(self, inv: Invocation) -> bool:
        """Whether the invocation's steps go to the run's step log."""
        return inv.ctx.step_log and self.step_log is not None

    def step(self, inv: Invocation, key: str, kind: StepKind, data: dict[str, Any]) -> Step:
        """A step of the invocation, for the step log."""
        # Scrubbed like events: the store never holds a secret (a resumed run reads the
        # placeholder where a tool's result had one).
        data = self.redactor.value(data)
        return Step(invocation=inv.id, key=key, kind=kind, data=data, epoch=inv.ctx.epoch)

    def record(self, inv: Invocation, key: str, kind: StepKind, data: dict[str, Any]) -> None:
        """Queue a step for the step log (sent with the next batch)."""
        if self.step_log is not None:
            self.step_log.record(inv.ctx.run_id, self.step(inv, key, kind, data))

    async def commit(self, inv: Invocation, key: str, kind: StepKind, data: dict[str, Any]) -> bool:
        """Store a step (and all queued before it) now; False if the run has moved on."""
        assert self.step_log is not None
        return await self.step_log.commit(inv.ctx.run_id, self.step(inv, key, kind, data))

    def flush(self, inv: Invocation) -> None:
        """Send what is queued for the run's record at the end of this turn of the event loop."""
        if self.events is not None:
            self.events.flush(inv.ctx.run_id)

    def send_finished_spans(self, inv: Invocation) -> None:
        """Send the spans finished so far along with the events (called after a step ends).

        A process that dies mid-invocation then takes no finished work with it.
        """
        if self.span_source is None or self.events is None or not inv.trace_id:
            return
        spans = self.span_source.drain(inv.trace_id)
        if spans:
            self.events.keep_spans(inv.ctx.run_id, spans)

    def capturing(self, span: trace.Span) -> bool:
        """Whether `span` records message contents (opt-in): build costly values only then."""
        return self.trace_options.capture_content and span.is_recording()

    def content(self, span: trace.Span, key: str, value: Any) -> None:
        """Record a captured content on `span`, if contents are recorded."""
        if self.capturing(span):
            record_content(span, key, value, self.trace_options.max_content_chars)

    def end(
        self,
        inv: Invocation,
        status: RunStatus,
        *,
        output: str | None = None,
        error: str | None = None,
    ) -> AgentResult:
        """How the invocation ended, with its usage, children and refusals."""
        return AgentResult(
            agent=self.agent,
            status=status,
            output=self.redactor.text(output) if output is not None else None,
            error=self.redactor.text(error) if error is not None else None,
            usage=inv.usage,
            steps=inv.steps,
            started_at=inv.started_at,
            duration_s=time.perf_counter() - inv.clock,
            call_id=inv.delegation.call_id,
            actor=self.actor_id,
            children=inv.children,
            refusals=inv.refusals,
            state_changes=inv.changes,
        )
