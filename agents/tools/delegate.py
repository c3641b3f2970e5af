"""Delegation as a tool: the calling model sees one tool per agent it may hand work to."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import trace

from agents.core.guard import check_delegation
from agents.core.json_schema import value_problems
from agents.core.messages import (
    AgentResult,
    Delegation,
    RunStatus,
    handoff_note,
    latest_request,
)
from agents.core.spec import AgentCard, AgentSpec
from agents.tools.ask import ASK_USER, AskUserTool
from agents.tools.base import Tool, ToolCallContext, ToolOutput, load_tool
from agents.tools.files import FILE_TOOL_NAMES, FileTools
from agents.tools.memory import memory_tools
from tracing import attributes as attr

if TYPE_CHECKING:
    from agents.core.ports import Ledger, Memory
from tracing import inject_context

__all__ = [
    "DELEGATE_PREFIX",
    "DelegateTool",
    "Dispatcher",
    "HandoffTool",
    "build_tools",
    "delegate_tool_name",
    "input_problems",
    "reserved_by",
]

DELEGATE_PREFIX = attr.DELEGATE_TOOL_PREFIX
_MAX_RESULT_CHARS = 8_000


def delegate_tool_name(agent: str) -> str:
    """The name of the tool that delegates to `agent`."""
    return f"{DELEGATE_PREFIX}{agent}"


def reserved_by(name: str) -> str | None:
    """What owns a tool name no agent's own tool may take, or None if it is free."""
    if name in FILE_TOOL_NAMES:
        return f"the built-in file tool {name!r}"
    if name == ASK_USER:
        return "the built-in question tool (ask_user: true)"
    if name.startswith(DELEGATE_PREFIX):
        return f"the delegation tools ({DELEGATE_PREFIX}<agent>)"
    if name.startswith(attr.HANDOFF_TOOL_PREFIX):
        return f"the hand-off tools ({attr.HANDOFF_TOOL_PREFIX}<agent>)"
    return None


class Dispatcher(Protocol):
    """Hands a delegation to the target agent's worker (a Ray actor, or anything in tests)."""

    async def dispatch(self, target: str, delegation: Delegation) -> AgentResult:
        """Hand `delegation` to the agent `target` and return its result."""


def _describe(card: AgentCard) -> str:
    text = f"Delegate a task to the agent '{card.name}'"
    if card.description:
        text += f": {card.description.rstrip('.')}."
    if card.capabilities:
        text += f" Capabilities: {', '.join(card.capabilities)}."
    return text + " Returns its answer."


@dataclass
class DelegateTool:
    """The tool that hands a task to `target`, behind the guard."""

    caller: str
    target: AgentCard
    allowed: bool
    dispatcher: Dispatcher
    ledger: Ledger | None = None

    @property
    def name(self) -> str:
        """`delegate_to_{agent}`, or the name the target's `tool.name` gives."""
        return self.target.tool.name or delegate_tool_name(self.target.name)

    @property
    def description(self) -> str:
        """The target agent's description and capabilities (or its `tool.description`)."""
        return self.target.tool.description or _describe(self.target)

    @property
    def confirm(self) -> bool:
        """Whether delegations to the target wait for a person's approval."""
        return self.target.confirm

    @property
    def parameters(self) -> dict[str, Any]:
        """The task to hand over; and its structured input, when the target takes one."""
        properties: dict[str, Any] = {
            "task": {"type": "string", "description": "What the agent should do, self-contained."}
        }
        required = ["task"]
        if self.target.accepts is not None:
            properties["input"] = self.target.accepts
            required.append("input")
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        """Check the delegation (its input, then the guard), dispatch it, report the result."""
        task = arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            return ToolOutput("invalid arguments: 'task' must be a non-empty string", is_error=True)
        given = arguments.get("input")
        if problems := input_problems(self.target, given):
            return ToolOutput(
                f"invalid input for {self.target.name}: {'; '.join(problems)}", is_error=True
            )
        return await self._hand(task, [], ctx, given)

    async def _hand(
        self,
        task: str,
        history: list[dict[str, Any]],
        ctx: ToolCallContext,
        given: Any = None,
    ) -> ToolOutput:
        run = ctx.run
        target = self.target.name
        if self.allowed and target in run.chain and ctx.visits is not None:
            return self._back(task)
        tokens_left = None
        if run.limits.token_budget is not None and self.ledger is not None:
            tokens_left = await self.ledger.tokens_left(run.run_id)
        # Steps, not calls: a step may fan one task out to the same agent many times at once.
        steps = None if ctx.visits is None else ctx.visits.setdefault(target, set())
        visits = None if steps is None else len(steps - {ctx.step})
        # Raises DelegationRefused; the runtime turns it into a structured tool error.
        check_delegation(
            caller=self.caller,
            target=target,
            known=True,
            allowed=self.allowed,
            ctx=run,
            tokens_left=tokens_left,
            visits=visits,
        )
        if steps is not None:
            steps.add(ctx.step)
        handoff = bool(history)
        remembered = run.memories.get(self.target.name)
        if remembered and not handoff:  # `memory: thread`: its own exchanges, then the task
            history = [*remembered, {"role": "user", "content": task}]
        delegation = Delegation(
            task=task,
            input=given,
            context=run.enter(self.target.name, inject_context()),
            caller=self.caller,
            call_id=ctx.call_id,
            invocation=ctx.child_invocation,
            replay=ctx.replay,
            history=history,
            state=ctx.state.as_dict() if ctx.state is not None else {},
        )
        result = await self.dispatcher.dispatch(target, delegation)
        back = result.handed_back_to
        if back is not None and back != self.caller:  # for an agent further up: pass it on
            return ToolOutput(result.output or "", child=result, hand_back=back)
        if back is not None:  # control is this agent's again, whatever tool gave it away
            said = f"{target} handed control back to you: {result.output or ''}"
            return ToolOutput(said, child=result)
        return ToolOutput(
            _result_text(result, self.target.tool.output),
            is_error=result.status != RunStatus.SUCCEEDED,
            child=result,
            handoff=handoff,
        )

    def _back(self, message: str) -> ToolOutput:
        """Control back to the agent up the chain: this turn ends, it goes on with `message`.

        As LangGraph's report-back to a supervisor and ADK's transfer to the parent: no new
        invocation of it (that would be a cycle), its turn that is waiting resumes.
        """
        span = trace.get_current_span()
        span.set_attribute(attr.BATON_HAND_BACK, True)
        return ToolOutput(message, hand_back=self.target.name)


@dataclass
class HandoffTool(DelegateTool):
    """The tool that hands the whole conversation over to `target`, which answers from there."""

    @property
    def name(self) -> str:
        """`transfer_to_{agent}`."""
        return f"{attr.HANDOFF_TOOL_PREFIX}{self.target.name}"

    @property
    def description(self) -> str:
        """Who takes over, for the model."""
        text = _describe(self.target).removeprefix("Delegate a task to")
        text = text.removesuffix(" Returns its answer.")
        return f"Hand the conversation over to{text} It answers from here on; you stop."

    @property
    def parameters(self) -> dict[str, Any]:
        """One optional argument: a note for the agent that takes over."""
        return {
            "type": "object",
            "properties": {"note": {"type": "string", "description": "What it should know."}},
            "additionalProperties": False,
        }

    async def call(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        """Hand the conversation (and the note) over, behind the guard; its answer is ours."""
        history = list(ctx.history or [])
        task = latest_request(history)
        told = handoff_note(self.caller, arguments.get("note"))
        if self.target.name in ctx.run.chain:  # back up the chain: the note is the message
            return await self._hand(arguments.get("note") or told, [], ctx)
        history.append({"role": "user", "content": told})
        return await self._hand(task or told, history, ctx)


def _field_of(text: str, field: str) -> str:
    """The value at `field` (`a.b`) of a JSON answer, as text; the whole answer if it has none."""
    try:
        value: Any = json.loads(text)
        for part in field.split("."):
            value = value[part]
    except (json.JSONDecodeError, KeyError, TypeError):
        return text
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def input_problems(target: AgentCard, given: Any) -> list[str]:
    """What in `given` does not fit the input `target` takes (each problem at its place).

    An agent that declares no `input_schema` takes any input (or none).
    """
    if target.accepts is None:
        return []
    if given is None:
        return ["(top): the structured input is missing"]
    return value_problems(target.accepts, given)


def _result_text(result: AgentResult, field: str | None = None) -> str:
    """What the caller's model is told of the callee's result (`field`: of its JSON answer)."""
    if result.status == RunStatus.SUCCEEDED:
        text = result.output or ""
        if field is not None:
            text = _field_of(text, field)
    else:
        text = f"error: {result.agent} ended {result.status.value}: {result.error or 'no detail'}"
    return text if len(text) <= _MAX_RESULT_CHARS else text[:_MAX_RESULT_CHARS] + " [truncated]"


def build_tools(
    spec: AgentSpec,
    roster: list[AgentCard],
    delegates: list[str],
    dispatcher: Dispatcher,
    ledger: Ledger | None = None,
    memory: Memory | None = None,
) -> tuple[list[Tool], dict[str, Tool]]:
    """An agent's tools: its function tools and a delegation tool per other agent.

    And its built-in ones: file tools, `ask_user`, the long-term memory tools (over `memory`).

    Delegation tools for the agents it may hand work to are offered; those for the others are
    hidden: callable, so that a model that names one is refused clearly rather than told the tool
    does not exist.
    """
    offered: list[Tool] = [load_tool(ref) for ref in spec.tools]
    if spec.files is not None:
        offered.extend(FileTools(spec.files).tools())
    if spec.ask_user:
        offered.append(AskUserTool())
    if spec.long_term_memory is not None:
        offered.extend(memory_tools(spec.long_term_memory, memory))
    hidden: dict[str, Tool] = {}
    for card in roster:
        if card.name == spec.name:
            continue
        tool = DelegateTool(
            caller=spec.name,
            target=card,
            allowed=card.name in delegates,
            dispatcher=dispatcher,
            ledger=ledger,
        )
        if tool.allowed:
            offered.append(tool)
        else:
            hidden[tool.name] = tool
        if card.name in spec.handoffs:
            offered.append(HandoffTool(spec.name, card, True, dispatcher, ledger))
    return offered, hidden
