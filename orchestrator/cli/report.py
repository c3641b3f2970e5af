"""Terminal rendering of topologies, config problems and run results (rich)."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.json import JSON
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agents.core.errors import ConfigIssue
from agents.core.messages import RunStatus, Usage
from agents.core.placement import own_actors_reason
from agents.core.spec import AgentSpec
from agents.core.steering_spec import StepRule
from orchestrator.schemas import DelegationNode, RunView
from orchestrator.store import RunPage, StoredRun
from orchestrator.system.config import AgentSystem
from tracing import SpanRecord
from tracing import attributes as attr
from tracing.tree import SpanTree, span_forest

__all__ = [
    "print_issues",
    "print_run_view",
    "print_runs",
    "print_topology",
    "print_trace",
    "result_tree",
    "span_tree",
]

_STYLE = {
    RunStatus.SUCCEEDED: "green",
    RunStatus.FAILED: "red",
    RunStatus.CANCELLED: "yellow",
    RunStatus.LIMIT_EXCEEDED: "magenta",
    RunStatus.BUDGET_EXCEEDED: "magenta",
    RunStatus.GUARDRAIL_TRIPPED: "red",
}
_MARK = {
    RunStatus.SUCCEEDED: "✓",
    RunStatus.FAILED: "✗",
    RunStatus.CANCELLED: "■",
    RunStatus.LIMIT_EXCEEDED: "⧗",
    RunStatus.BUDGET_EXCEEDED: "$",
    RunStatus.GUARDRAIL_TRIPPED: "⛨",
}


def print_issues(console: Console, issues: list[ConfigIssue]) -> None:
    """Print config problems, errors red and warnings yellow."""
    for issue in issues:
        style = "red" if issue.severity == "error" else "yellow"
        console.print(Text(str(issue), style=style), soft_wrap=True)


def _tools_cell(agent: AgentSpec) -> str:
    """An agent's function tools by name, its file tools and its MCP servers.

    (`baton check` lists each server's tools once it has reached it.)
    """
    names = [t.function.rpartition(":")[2] or t.function for t in agent.tools]
    if agent.files is not None:
        names.append(f"files in {agent.files.base_dir}")
    names += [f"MCP {m.name}" for m in agent.mcp]
    return ", ".join(names) or "-"


def _capabilities(agent: AgentSpec) -> list[str]:
    """What an agent does besides its model, tools and delegations (for `baton check`)."""
    lines = []
    shape = agent.output_schema
    if shape is not None:
        what = shape if isinstance(shape, str) else "an inline JSON Schema"
        lines.append(
            f"answers JSON: {what} ({agent.output_mode} mode: {_structured_mode(agent)}, "
            f"{agent.output_retries} retries)"
        )
    context = agent.context
    if context.strategy != "none":
        room = f"{context.max_tokens} tokens" if context.max_tokens else "the model's window"
        lines.append(
            f"context: {context.strategy} to fit {room} (keeps the last {context.keep_last})"
        )
    if agent.handoffs:
        lines.append(f"hands the conversation over to: {', '.join(agent.handoffs)}")
    lines += [f"hook: {path}" for path in agent.hooks]
    lines += [f"step rule {i + 1}: {_rule(rule)}" for i, rule in enumerate(agent.step_rules)]
    rails = agent.guardrails
    for stage in ("input", "output"):
        for guard in getattr(rails, stage):
            lines.append(f"guardrail on its {stage}: {guard.label}")
    for guard in rails.tools:
        verb = "redacts" if guard.action == "redact" else "checks"
        lines.append(f"guardrail {guard.label} {verb} the {guard.check} of {guard.tool}")
    return lines


def _structured_mode(agent: AgentSpec) -> str:
    """How its model will be asked for JSON: natively, or in its prompt (and why)."""
    if agent.output_mode == "prompt":
        return "in the prompt"
    if agent.output_mode == "native":
        return "native (response_format)"
    from agents.models.client import takes_json_schema

    if takes_json_schema(agent.model.name):
        return f"native: {agent.model.name} takes a JSON Schema"
    return f"in the prompt: litellm knows no JSON Schema support of {agent.model.name}"


def _rule(rule: StepRule) -> str:
    when = ", ".join(f"{k} {v}" for k, v in rule.when.model_dump(exclude_none=True).items())
    use = ", ".join(f"{k} {v}" for k, v in rule.use.model_dump(exclude_none=True).items())
    return f"when {when}: {use}"


def print_topology(console: Console, system: AgentSystem) -> None:
    """Print the agents, whom each may delegate to, and the static depth and cycles."""
    topology = system.topology
    table = Table(
        title=f"{system.config.name}: {len(system.config.agents)} agents (entry: {topology.entry})"
    )
    for column in ("agent", "delegates to", "tools", "model"):
        table.add_column(column)
    for agent in system.config.agents:
        table.add_row(
            agent.name,
            ", ".join(topology.delegates(agent.name)) or "-",
            _tools_cell(agent),
            agent.answered_by,
        )
    console.print(table)
    for agent in system.config.agents:
        for line in _capabilities(agent):
            console.print(f"{agent.name}: {line}", soft_wrap=True)
    reasons = {a.name: own_actors_reason(a) for a in system.config.agents}
    shared = [name for name, reason in reasons.items() if reason is None]
    if shared:
        replicas = system.config.shared_host.replicas
        kind = "one shared actor process" if replicas == 1 else f"{replicas} shared actor processes"
        console.print(f"{kind}: {', '.join(shared)}")
    for name, reason in reasons.items():
        if reason is not None:
            console.print(f"own actors: {name} ({reason})")
    depth = topology.max_static_depth()
    cycles = topology.cycles()
    console.print(
        f"max static depth: {depth if depth is not None else 'unbounded (cycles)'}; "
        f"runtime max_depth: {system.config.limits.max_depth}"
    )
    for cycle in cycles:
        back = f"{cycle[-1]} -> {cycle[0]}" if len(cycle) > 1 else f"{cycle[0]} -> itself"
        console.print(
            f"allowed cycle: {' -> '.join([*cycle, cycle[0]])} (at run time, {back} hands "
            "control back up the chain; max_visits stops a ping-pong)",
            style="yellow",
        )


def _label(node: DelegationNode) -> Text:
    style = _STYLE[node.status]
    label = Text(f"{_MARK[node.status]} {node.agent}", style=f"bold {style}")
    label.append(
        f"  {node.status.value}  {node.duration_s * 1000:.0f} ms  "
        f"{node.steps} model call{'' if node.steps == 1 else 's'}  "
        f"tokens {node.usage.input_tokens}/{node.usage.output_tokens}{_cost(node.usage)}",
        style="dim",
    )
    if node.error:
        label.append(f"  {node.error[:160]}", style=style)
    return label


def _money(usage: Usage) -> str:
    """A cost as people read it: a dash when unknown (no price), "≥ $x" when partly unknown."""
    if usage.unpriced_calls and not usage.cost_usd:
        return "\N{EN DASH}"
    return f"{'≥ ' if usage.unpriced_calls else ''}${usage.cost_usd:.4f}"


def _cost(usage: Usage) -> str:
    return f"  {_money(usage)}" if usage.cost_usd or usage.unpriced_calls else ""


def result_tree(node: DelegationNode, tree: Tree | None = None) -> Tree:
    """The delegation tree: each node's status, duration, steps, tokens (in/out) and refusals."""
    branch = tree.add(_label(node)) if tree is not None else Tree(_label(node))
    for child in node.children:
        result_tree(child, branch)
    for refusal in node.refusals:
        branch.add(
            Text(
                f"⊘ {refusal.target} refused ({refusal.reason}): {refusal.message}", style="yellow"
            )
        )
    return branch


def _status_style(status: str) -> str:
    try:
        return _STYLE.get(RunStatus(status), "yellow")  # yellow: waiting, running, interrupted
    except ValueError:
        return "yellow"


# `baton runs` columns, most wanted first: id, status and task always; the rest while they fit.
_RUN_COLUMNS = ("id", "status", "task", "created", "entry", "duration", "tokens in/out", "cost")
_MIN_TASK = 10  # the least a task is cut to
_WANT_TASK = 30  # other columns come only while the task keeps this much


def _run_cells(run: StoredRun) -> dict[str, str]:
    return {
        "id": run.id,
        "status": run.status,
        "task": " ".join(filter(None, [_lineage_tag(run), *run.task.split()])),
        "created": time.strftime("%m-%d %H:%M:%S", time.localtime(run.created_at)),
        "entry": run.entry_agent or run.agent or "-",
        "duration": f"{run.duration_s:.2f}s" if run.duration_s is not None else "-",
        "tokens in/out": f"{run.input_tokens}/{run.output_tokens}",
        "cost": _money(run.usage),
    }


def _lineage_tag(run: StoredRun) -> str:
    """`(fork of 1a2b3c4d5e6f)` or `(replay of ...)` before a task; "" for a run of its own."""
    if run.replay_of is None:
        return ""
    return f"({'fork' if run.fork else 'replay'} of {run.replay_of[:12]})"


def _lineage(run: RunView) -> str | None:
    """Where a replay or fork comes from, in words; None for a run of its own."""
    if run.replay_of is None:
        return None
    if not run.fork:
        return f"replay of run {run.replay_of} (every step from its record)"
    if run.fork_from is not None:
        return f"fork of run {run.replay_of}, live from {run.fork_from.label}"
    return f"fork of run {run.replay_of}, live from the first step that differs"


def _fitting(rows: list[dict[str, str]], width: int) -> dict[str, int]:
    """The columns that fit in `width` and the width of each (two spaces between them).

    Columns are taken in `_RUN_COLUMNS` priority; the task gets what is left over.
    """
    widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in _RUN_COLUMNS}
    used = widths["id"] + widths["status"] + 4
    chosen = ["id", "status", "task"]
    for column in _RUN_COLUMNS[3:]:
        if used + _WANT_TASK + widths[column] + 2 <= width:
            chosen.append(column)
            used += widths[column] + 2
    widths["task"] = max(_MIN_TASK, min(widths["task"], width - used))
    return {c: widths[c] for c in _RUN_COLUMNS if c in chosen}


def print_runs(console: Console, page: RunPage) -> None:
    """Print a page of runs: a table fitted to the terminal, or tab-separated in a pipe.

    Ids are what people copy and statuses what they scan: neither is ever cut; the task takes
    what width is left, and the other columns go, least wanted first, when it runs out.
    """
    rows = [_run_cells(run) for run in page.runs]
    summary = (
        f"{len(page.runs)} of {page.total} runs, newest first · all {page.total}: "
        f"{page.usage.total_tokens} tokens, {_money(page.usage)}"
    )
    if not console.is_terminal:  # a pipe: every column, whole, one line a run (tabs kept)
        lines = [
            "\t".join(_RUN_COLUMNS),
            *("\t".join(row[c] for c in _RUN_COLUMNS) for row in rows),
        ]
        console.file.write("".join(f"{line}\n" for line in lines))
        return
    table = Table(box=None, pad_edge=False, header_style="bold", title_justify="left")
    table.title = summary
    chosen = _fitting(rows, console.width)
    for column, needed in chosen.items():
        table.add_column(
            column,
            no_wrap=True,
            overflow="ellipsis",
            min_width=needed,
            max_width=needed,
        )
    for row in rows:
        table.add_row(
            *(
                Text(row[c], style=_status_style(row[c])) if c == "status" else row[c]
                for c in chosen
            )
        )
    console.print(table)


def print_run_view(console: Console, run: RunView, *, answer: bool = True) -> None:
    """A run: its answer or error in a panel, then usage, routing and the delegation tree.

    `answer=False`: the answer goes elsewhere (stdout, piped): a title line instead of the
    panel, and the error if the run failed.
    """
    body = run.output if run.status == RunStatus.SUCCEEDED.value else (run.error or "")
    duration = f" · {run.duration_s:.2f}s" if run.duration_s is not None else ""
    title = f"run {run.id} · {run.status}{duration}"
    if not answer:
        console.print(title, style=_status_style(run.status))
        if run.status != RunStatus.SUCCEEDED.value and body:
            console.print(body, style="red", soft_wrap=True)
    else:
        shown: JSON | Text = Text(body or "(empty)")
        if run.output_json is not None:  # a structured answer (the entry agent's output_schema)
            shown = JSON.from_data(run.output_json)
            # Long strings wrap inside the panel instead of being cut at its edge.
            shown.text.no_wrap = False
            shown.text.overflow = "fold"
        console.print(Panel(shown, title=title, border_style=_status_style(run.status)))
    console.print(f"task: {run.task}", style="dim", soft_wrap=True)
    came_from = _lineage(run)
    if came_from is not None:
        console.print(came_from, style="dim", soft_wrap=True)
    if run.routing is not None:
        console.print(
            f"routed to {run.entry_agent}: {run.routing.get('reason')} {run.routing.get('scores')}",
            style="dim",
        )
    usage = run.usage
    if run.tree is not None:
        calls = f"{usage.model_calls} model call{'' if usage.model_calls == 1 else 's'}"
        console.print(
            Group(
                Text(
                    f"delegation tree · {calls} · tokens "
                    f"{usage.input_tokens} in / {usage.output_tokens} out{_cost(usage)}",
                    style="bold",
                ),
                result_tree(run.tree),
            )
        )


def _span_label(node: SpanTree, origin_ns: int) -> Text:
    span, attributes = node.span, node.attrs
    label = Text(f"{'✗' if node.failed else '✓'} {node.name}", style="red" if node.failed else "")
    start_ms = (span["start_ns"] - origin_ns) / 1e6
    label.append(f"  +{start_ms:.1f} ms  {node.duration_ms or 0:.1f} ms", style="dim")
    if attr.GEN_AI_USAGE_INPUT_TOKENS in attributes:
        label.append(
            f"  tokens {attributes[attr.GEN_AI_USAGE_INPUT_TOKENS]}/"
            f"{attributes.get(attr.GEN_AI_USAGE_OUTPUT_TOKENS, 0)}",
            style="dim",
        )
    cost = attributes.get(attr.BATON_USAGE_COST)
    label.append(_cost(Usage(cost_usd=float(cost))) if cost else "", style="dim")
    if node.failed and span.get("status_message"):
        label.append(f"  {str(span['status_message'])[:160]}", style="red")
    for event in span.get("events", []):
        said = event["attributes"]
        if event["name"] == attr.EVENT_EVALUATION_RESULT:  # an expectation `baton eval` checked
            outcome = said.get(attr.GEN_AI_EVALUATION_SCORE_LABEL)
            score = said.get(attr.GEN_AI_EVALUATION_SCORE_VALUE)
            scored = f" {score:.2f}" if isinstance(score, float) and score not in (0, 1) else ""
            text = f"  [{outcome}{scored}: {said.get(attr.GEN_AI_EVALUATION_NAME)}]"
            label.append(text, style="green" if outcome == "pass" else "red")
            continue
        label.append(f"  [{_event_text(event['name'], said)}]", style="yellow")
    return label


# The attribute that says a span event in words, where it has one.
_SAID_BY = ("message", "reason", "problem", "error")


def _event_text(name: str, said: dict[str, Any]) -> str:
    """A span event in one line: its words, else its attributes (`step=2 rules=[trim]`)."""
    words = next((str(said[key]) for key in _SAID_BY if said.get(key)), None)
    if words is None:
        words = " ".join(f"{key}={_short(value)}" for key, value in said.items())
    return f"{name}: {words[:160]}" if words else name


def _short(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def span_tree(spans: list[SpanRecord]) -> Tree:
    """Spans nested by parentage, each with its start offset, duration, status and tokens."""
    origin = min((s["start_ns"] for s in spans), default=0)
    root = Tree(Text(f"trace · {len(spans)} spans", style="bold"))

    def add(branch: Tree, nodes: list[SpanTree]) -> None:
        for node in nodes:
            add(branch.add(_span_label(node, origin)), node.children)

    add(root, span_forest(spans))
    return root


def print_trace(console: Console, spans: list[SpanRecord]) -> None:
    """Print a run's span tree."""
    console.print(span_tree(spans))
