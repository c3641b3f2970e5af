"""An agent's runtime: each invocation inside its `invoke_agent` span, with its events and result.

The work of an invocation is the tool loop (`agents.runtime.loop.ToolLoop`), or, for an agent
that is another agent system reached over A2A, one exchange with it
(`agents.runtime.remote.RemoteExchange`): to its callers, the guard, the trace and the diagram
both are agents like any other.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.core.errors import describe_error
from agents.core.events import AgentFinished, AgentStarted
from agents.core.limits import TraceOptions
from agents.core.messages import AgentResult, Delegation, RunStatus
from agents.core.ports import EventSink, RunRecord, SpanSource
from agents.core.spec import AgentSpec, ModelSpec
from agents.core.state import StateChange
from agents.core.steps import STATE_IN_KEY, model_key
from agents.models.base import BUILTIN_PREFIX, CHANGES_STATE, ModelClient, tool_schema
from agents.runtime.invocation import Invocation
from agents.runtime.loop import ToolLoop
from agents.runtime.model_calls import ModelCaller
from agents.runtime.people import People
from agents.runtime.remote import RemoteExchange
from agents.runtime.reporting import Reporter
from agents.runtime.steering import Steering
from agents.runtime.structured import OutputContract
from agents.runtime.tool_runner import ToolRunner
from agents.tools.base import Tool
from agents.tools.delegate import DelegateTool, HandoffTool, input_problems
from tracing import Redactor, agent_span, extract_context, genai, set_outcome, span_ids
from tracing import attributes as attr

__all__ = ["AgentRuntime"]


class _Work(Protocol):
    async def run(self, inv: Invocation) -> AgentResult: ...


@dataclass
class AgentRuntime:
    """Runs one agent's invocations.

    Args:
        spec: the agent.
        model: the model client.
        tools: the tools offered to the model.
        hidden_tools: tools callable by name but not offered (delegations the topology forbids,
            kept so that a model naming one gets a clear refusal instead of "unknown tool").
        record: the run-wide record: budget and caps, waits for a person, the step log (used
            when the run asks for it: `RunContext.step_log`), and where events go. None: a
            bare runtime (no budget, no one to ask, no step log).
        events: where progress events go when there is no record (default: the record's).
        span_source: this process's span collector; an invocation's finished spans go to the
            event sink with its last events.
        actor_id: which worker this is, for results and spans.
        trace_options: what spans record (message contents are opt-in).
        redactor: scrubs secrets from results and events (spans are scrubbed by the collector).
        models: makes a client for another model (a guardrail's judge).
    """

    spec: AgentSpec
    model: ModelClient
    tools: Sequence[Tool] = ()
    hidden_tools: Mapping[str, Tool] = field(default_factory=dict)
    record: RunRecord | None = None
    events: EventSink | None = None
    span_source: SpanSource | None = None
    actor_id: str = "local"
    trace_options: TraceOptions = field(default_factory=TraceOptions)
    redactor: Redactor = field(default_factory=Redactor)
    models: Callable[[ModelSpec], ModelClient] | None = None

    def __post_init__(self) -> None:
        spec = self.spec
        self._by_name: dict[str, Tool] = {**self.hidden_tools, **{t.name: t for t in self.tools}}
        # The tools offered to the model, as sent (`add_tools` appends to it).
        self.schemas = [self._schema(t) for t in self.tools]
        contract = (
            OutputContract.of(spec, self.model.supports_json_schema())
            if spec.output_schema is not None
            else None
        )
        self._card = spec.card()  # (its input schema, imported once)
        record = self.record
        if record is not None and self.events is None:
            self.events = record.sink
        self.reporter = Reporter(
            spec.name,
            self.actor_id,
            self.events,
            self.span_source,
            record,
            self.trace_options,
            self.redactor,
        )
        self.caller = ModelCaller(
            spec,
            self.model,
            self.reporter,
            record,
            self.models,
            contract.response_format() if contract else None,
        )
        self.steering = Steering(spec, self.caller, self.reporter, self.schemas, record)
        people = People(self.reporter, record)
        runner = ToolRunner(
            spec,
            self._by_name,
            self.reporter,
            people,
            ledger=record,
            guard=self.steering.tool_call,
        )
        self._work: _Work
        if spec.a2a is not None:
            asks = people if spec.ask_user else None
            self._work = RemoteExchange(spec.a2a, self.reporter, record, asks)
        elif spec.workflow is not None:
            from agents.workflows.run import WorkflowRun  # (imports the workflow's code)

            callees = {
                t.target.name: t
                for t in self._by_name.values()
                if isinstance(t, DelegateTool) and not isinstance(t, HandoffTool)
            }
            self._work = WorkflowRun(spec, runner, people, self.reporter, callees)
        else:
            self._work = ToolLoop(
                spec, self.caller, runner, self.steering, self.reporter, record, contract
            )

    def tool_names(self) -> set[str]:
        """Every name a model may call, hidden delegations included."""
        return set(self._by_name)

    def add_tools(self, tools: Sequence[Tool]) -> None:
        """Offer more tools (found after start, such as an MCP server's); names must be new."""
        for tool in tools:
            if tool.name in self._by_name:
                raise ValueError(f"tool name {tool.name!r} is taken")
            self._by_name[tool.name] = tool
            self.schemas.append(self._schema(tool))

    def _schema(self, tool: Tool) -> dict[str, Any]:
        schema = tool_schema(tool.name, tool.description, tool.parameters)
        # Only the built-in models (in this process) hear that a tool changes things.
        if getattr(tool, "changes_state", False) and self.model.model.startswith(BUILTIN_PREFIX):
            schema["function"][CHANGES_STATE] = True
        return schema

    def _keep_for_thread(self, inv: Invocation, result: AgentResult, task: str) -> None:
        """Keep its task and exchange in its result (`memory: thread`), with no secret."""
        result.task = result.input_kept if result.input_kept is not None else task
        if inv.exchange:  # (a round trip through the redactor)
            result.exchange = json.loads(self.redactor.text(json.dumps(inv.exchange)))

    async def invoke(self, delegation: Delegation, *, flush: bool = True) -> AgentResult:
        """Run one delegation and report how it ended.

        Args:
            delegation: the task and the run it belongs to.
            flush: send what is queued for the ledger before returning (the invocation's last
                events and spans). An agent host passes False: it sends them itself, or hands
                them to its caller's process with the result.
        """
        ctx, reporter = delegation.context, self.reporter
        inv = Invocation(delegation, self.spec.max_steps or ctx.limits.max_steps)
        if delegation.invocation:
            inv.id = delegation.invocation
        ids: dict[str, Any] = {}
        try:
            with agent_span(
                self.spec.name,
                self.actor_id,
                ctx.run_id,
                ctx.chain,
                extract_context(ctx.trace_context),
                ctx.thread_id,
            ) as span:
                inv.trace_id = span.get_span_context().trace_id
                ids = span_ids(span)
                reporter.emit(
                    inv,
                    AgentStarted,
                    call_id=delegation.call_id,
                    caller=delegation.caller,
                    **ids,
                )
                task = delegation.task
                if delegation.input is not None:
                    reporter.content(span, attr.BATON_INPUT, json.dumps(delegation.input))
                user = genai.text_messages("user", task)
                reporter.content(span, attr.GEN_AI_INPUT_MESSAGES, user)
                reporter.content(span, attr.INPUT_VALUE, task)
                if self.spec.instructions:
                    instructions = genai.system_instructions(self.spec.instructions)
                    reporter.content(span, attr.GEN_AI_SYSTEM_INSTRUCTIONS, instructions)
                if ctx.epoch:
                    span.set_attribute(attr.BATON_RUN_EPOCH, ctx.epoch)
                if reporter.logs_steps(inv):
                    span.set_attribute(attr.BATON_STEP, f"{inv.id}/{model_key(1)}")
                try:
                    await self._recall(inv)
                    misfits = input_problems(self._card, delegation.input)
                    if misfits:  # nothing runs on input it does not take
                        error = f"the input does not fit {self.spec.name}: {'; '.join(misfits)}"
                        result = reporter.end(inv, RunStatus.FAILED, error=error)
                    else:
                        result = await self._work.run(inv)
                        self._save(inv, result)
                except Exception as exc:  # a bug or an unexpected library error: report
                    result = reporter.end(inv, RunStatus.FAILED, error=describe_error(exc))
                if self.spec.memory == "thread":  # its later runs in the thread see it
                    self._keep_for_thread(inv, result, task)
                if result.input_kept is not None:  # what an input guardrail blocked goes nowhere
                    kept = genai.text_messages("user", result.input_kept)
                    reporter.content(span, attr.GEN_AI_INPUT_MESSAGES, kept)
                    reporter.content(span, attr.INPUT_VALUE, result.input_kept)
                total = result.usage
                span.set_attribute(attr.GEN_AI_USAGE_INPUT_TOKENS, total.input_tokens)
                span.set_attribute(attr.GEN_AI_USAGE_OUTPUT_TOKENS, total.output_tokens)
                span.set_attribute(attr.BATON_USAGE_COST, total.cost_usd)
                if result.output is not None:
                    answer = genai.text_messages("assistant", result.output, "stop")
                    reporter.content(span, attr.GEN_AI_OUTPUT_MESSAGES, answer)
                    reporter.content(span, attr.OUTPUT_VALUE, result.output)
                if result.handed_back_to is not None:
                    span.set_attribute(attr.BATON_HANDED_BACK_TO, result.handed_back_to)
                if delegation.caller is None and (inv.state or inv.changes):
                    result.state = inv.state  # the run's, as it ended
                if result.status == RunStatus.SUCCEEDED:
                    set_outcome(span, None)
                else:
                    set_outcome(span, result.error or result.status.value, result.status.value)
        except asyncio.CancelledError:
            self._close(inv, flush=True)  # what it did so far is not lost with the call
            raise
        reporter.emit(
            inv,
            AgentFinished,
            call_id=delegation.call_id,
            status=result.status,
            duration_s=result.duration_s,
            steps=result.steps,
            error=result.error,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            handed_back_to=result.handed_back_to,
            **ids,
        )
        self._close(inv, flush)
        return result

    async def _recall(self, inv: Invocation) -> None:
        """Read what an earlier life of the invocation recorded; a run's entry, its state."""
        if not self.reporter.logs_steps(inv):
            return
        delegation, ctx = inv.delegation, inv.ctx
        if delegation.replay or ctx.epoch:
            assert self.record is not None
            inv.recorded.steps = await self.record.recorded(ctx.run_id, inv.id)
            inv.recorded.loaded = True
        if delegation.caller is None:
            self._state_in(inv)

    def _state_in(self, inv: Invocation) -> None:
        """The run's starting state: as recorded by its first life, else recorded now.

        A resumed, replayed or forked run begins with the state the run began with, whatever
        its thread's state has become since.
        """
        recorded = inv.recorded.get(STATE_IN_KEY)
        if recorded is not None:
            inv.state = dict(recorded.data.get("state") or {})
        elif inv.state or inv.ctx.thread_id is not None:
            self.reporter.record(inv, STATE_IN_KEY, "state", {"state": inv.state})

    def _save(self, inv: Invocation, result: AgentResult) -> None:
        """Write its answer to the shared state at `save_as` (ADK's `output_key`).

        Raises:
            StateError: the state's schema refuses it (the invocation fails, saying so).
        """
        key = self.spec.save_as
        if key is None or result.status != RunStatus.SUCCEEDED or result.output is None:
            return
        if result.handed_back_to is not None:  # (a message for an agent up the chain)
            return
        value: Any = result.output
        if self.spec.output_schema is not None:
            value = json.loads(result.output)  # (checked against the schema already)
        change = StateChange(key=key, value=value, by=self.spec.name)
        self.reporter.wrote(inv, [change])
        result.state_changes = inv.changes

    def _close(self, inv: Invocation, flush: bool) -> None:
        """Queue the invocation's last spans with its last events (and send them, if `flush`).

        They travel together in one batch: whoever has the invocation's `agent_finished` has
        its spans too, and nothing stays buffered in a process that may die.
        """
        reporter = self.reporter
        reporter.send_finished_spans(inv)
        if flush and self.events is not None:
            self.events.flush(inv.ctx.run_id)
