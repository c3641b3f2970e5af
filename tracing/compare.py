"""A run's steps in words, and where two runs' steps differ, said the same in the CLI and UI.

Each agent invocation is a list of steps: a model call and what the model did with it (called
tools, delegated, handed over, answered directly). Two runs (a fork and its original, or any
two) are compared invocation by invocation, matched by agent and by order among that agent's
invocations, and each difference is one sentence: "writer, step 1: called word_count, now
answers directly".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tracing import attributes as attr
from tracing.records import SpanRecord
from tracing.tree import SpanTree, span_forest

__all__ = ["InvocationSteps", "differences", "run_steps", "step_label"]


@dataclass
class InvocationSteps:
    """One agent invocation's steps in words (`occurrence`: its place among the agent's)."""

    agent: str
    occurrence: int
    outcome: str
    steps: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """How sentences name it: the agent, and which of its invocations when there are more."""
        return self.agent if self.occurrence == 1 else f"{self.agent} (call {self.occurrence})"


def _outcome(node: SpanTree) -> str:
    if node.open:
        return "running"
    if node.failed:
        return str(node.attrs.get(attr.ERROR_TYPE) or "failed")
    return "ok"


def _tool_words(tool: SpanTree) -> str:
    name = tool.name.removeprefix(attr.TOOL_SPAN_PREFIX)
    target = tool.attrs.get(attr.BATON_DELEGATION_TARGET)
    if name.startswith(attr.HANDOFF_TOOL_PREFIX):
        said = f"handed over to {name.removeprefix(attr.HANDOFF_TOOL_PREFIX)}"
    elif target or name.startswith(attr.DELEGATE_TOOL_PREFIX):
        said = f"delegated to {target or name.removeprefix(attr.DELEGATE_TOOL_PREFIX)}"
    else:
        said = f"called {name}"
    return f"{said} (failed)" if tool.failed else said


def _joined(parts: list[str]) -> str:
    counted = Counter(parts)
    said = [p if n == 1 else f"{p} \N{MULTIPLICATION SIGN}{n}" for p, n in counted.items()]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def _steps(node: SpanTree) -> list[tuple[SpanTree | None, list[SpanTree]]]:
    """An invocation's model calls, each with the tool calls that followed it."""
    grouped: list[tuple[SpanTree | None, list[SpanTree]]] = []
    for child in node.children:
        chat = child.name.startswith(attr.CHAT_SPAN_PREFIX)
        if chat or not grouped:
            grouped.append((child if chat else None, []))
        if child.name.startswith(attr.TOOL_SPAN_PREFIX):
            grouped[-1][1].append(child)
    return grouped


def _step_words(chat: SpanTree | None, tools: list[SpanTree]) -> str:
    if chat is not None and chat.failed:
        return f"the model call failed ({chat.attrs.get(attr.ERROR_TYPE) or 'error'})"
    if tools:
        return _joined([_tool_words(t) for t in tools])
    if chat is not None and chat.open:
        return "asked the model"
    return "answered directly"


def run_steps(spans: list[SpanRecord]) -> list[InvocationSteps]:
    """Every agent invocation of a run, in the order they started, with its steps in words."""
    found: list[InvocationSteps] = []
    seen: Counter[str] = Counter()
    nodes = sorted(
        (n for root in span_forest(spans) for n in root.walk()),
        key=lambda n: int(n.span.get("start_ns") or 0),
    )
    for node in nodes:
        if not node.name.startswith(attr.AGENT_SPAN_PREFIX):
            continue
        seen[node.agent] += 1
        steps = [_step_words(chat, tools) for chat, tools in _steps(node)]
        found.append(InvocationSteps(node.agent, seen[node.agent], _outcome(node), steps))
    return found


def _present(said: str) -> str:
    """A step as this run did it ("now answers directly", "now calls word_count")."""
    for past, present in (
        ("answered", "answers"),
        ("called", "calls"),
        ("delegated", "delegates"),
        ("handed", "hands"),
        ("asked", "asks"),
    ):
        if said.startswith(past):
            return present + said[len(past) :]
    return said


def differences(before: list[SpanRecord], now: list[SpanRecord]) -> list[str]:
    """Where the run of `now` differs from the run of `before`, one sentence a difference.

    Empty when both took the same steps (timings and token counts aside).
    """
    said: list[str] = []
    old = {(i.agent, i.occurrence): i for i in run_steps(before)}
    new = {(i.agent, i.occurrence): i for i in run_steps(now)}
    for key in [*old, *(k for k in new if k not in old)]:
        was, is_ = old.get(key), new.get(key)
        if was is None and is_ is not None:
            said.append(f"{is_.name}: not called before, now called")
            continue
        if is_ is None and was is not None:
            said.append(f"{was.name}: called before, not now")
            continue
        assert was is not None and is_ is not None
        for n in range(max(len(was.steps), len(is_.steps))):
            a = was.steps[n] if n < len(was.steps) else None
            b = is_.steps[n] if n < len(is_.steps) else None
            where = f"{was.name}, step {n + 1}"
            if a == b:
                continue
            if a is None:
                said.append(f"{where}: no such step before, now {_present(str(b))}")
            elif b is None:
                said.append(f"{where}: {a}, now no such step")
            else:
                said.append(f"{where}: {a}, now {_present(b)}")
        if was.outcome != is_.outcome:
            said.append(f"{was.name}: ended {was.outcome} before, now {is_.outcome}")
    old_root, new_root = _root(before), _root(now)
    if old_root is not None and new_root is not None:
        if _outcome(old_root) != _outcome(new_root):
            said.append(f"the run: ended {_outcome(old_root)} before, now {_outcome(new_root)}")
        answers = [r.attrs.get(attr.OUTPUT_VALUE) for r in (old_root, new_root)]
        if None not in answers and answers[0] != answers[1]:
            said.append("the answer: differs")
    return said


def _root(spans: list[SpanRecord]) -> SpanTree | None:
    return next((r for r in span_forest(spans) if r.name == attr.WORKFLOW_SPAN), None)


def step_label(spans: list[SpanRecord], span_id: str) -> str:
    """A span of a run as a step a person can find: "writer, step 2: called word_count".

    A model call is named by its step and what the model did; a tool call by its step and the
    call; an agent's span by the agent (its invocation). Unknown spans are named by their id.
    """
    index = {n.span["span_id"]: n for root in span_forest(spans) for n in root.walk()}
    node = index.get(span_id)
    if node is None:
        return f"span {span_id}"
    if node.name.startswith(attr.AGENT_SPAN_PREFIX):
        return f"{node.agent}, from its start"
    parent = index.get(str(node.span.get("parent_span_id") or ""))
    if parent is None or not parent.name.startswith(attr.AGENT_SPAN_PREFIX):
        return node.name
    for n, (chat, tools) in enumerate(_steps(parent), 1):
        if node is chat:
            return f"{parent.agent}, step {n}: the model call ({_step_words(chat, tools)})"
        if node in tools:
            return f"{parent.agent}, step {n}: {_tool_words(node)}"
    return f"{parent.agent}: {node.name}"
