"""Terminal rendering of topologies, config problems and run results (rich)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agents.errors import ConfigIssue
from agents.messages import AgentResult, Outcome
from orchestrator.config import AgentSystem
from orchestrator.engine import RunResult

__all__ = ["print_issues", "print_run", "print_topology", "result_tree"]

_STYLE = {
    Outcome.SUCCEEDED: "green",
    Outcome.FAILED: "red",
    Outcome.CANCELLED: "yellow",
    Outcome.LIMIT_EXCEEDED: "magenta",
    Outcome.BUDGET_EXCEEDED: "magenta",
}
_MARK = {
    Outcome.SUCCEEDED: "✓",
    Outcome.FAILED: "✗",
    Outcome.CANCELLED: "■",
    Outcome.LIMIT_EXCEEDED: "⧗",
    Outcome.BUDGET_EXCEEDED: "$",
}


def print_issues(console: Console, issues: list[ConfigIssue]) -> None:
    for issue in issues:
        style = "red" if issue.severity == "error" else "yellow"
        console.print(Text(str(issue), style=style), soft_wrap=True)


def print_topology(console: Console, system: AgentSystem) -> None:
    topology = system.topology
    table = Table(
        title=f"{system.config.name}: {len(system.config.agents)} agents (entry: {topology.entry})"
    )
    for column in ("agent", "delegates to", "tools", "model", "replicas"):
        table.add_column(column)
    for agent in system.config.agents:
        table.add_row(
            agent.name,
            ", ".join(topology.delegates(agent.name)) or "-",
            ", ".join(t.rpartition(":")[2] or t for t in agent.tools) or "-",
            agent.model.name,
            str(agent.ray.replicas),
        )
    console.print(table)
    depth = topology.max_static_depth()
    cycles = topology.cycles()
    console.print(
        f"max static depth: {depth if depth is not None else 'unbounded (cycles)'}; "
        f"runtime max_depth: {system.config.limits.max_depth}"
    )
    for cycle in cycles:
        console.print(f"allowed cycle: {' -> '.join([*cycle, cycle[0]])}", style="yellow")


def _label(node: AgentResult) -> Text:
    style = _STYLE[node.status]
    label = Text(f"{_MARK[node.status]} {node.agent}", style=f"bold {style}")
    label.append(
        f"  {node.status.value}  {node.duration_s * 1000:.0f} ms  steps {node.steps}  "
        f"tokens {node.usage.input_tokens}/{node.usage.output_tokens}",
        style="dim",
    )
    if node.error:
        label.append(f"  {node.error[:160]}", style=style)
    return label


def result_tree(node: AgentResult, tree: Tree | None = None) -> Tree:
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


def print_run(console: Console, result: RunResult) -> None:
    style = _STYLE[result.status]
    body = result.output if result.status == Outcome.SUCCEEDED else (result.error or "")
    title = f"run {result.run_id} · {result.status.value} · {result.duration_s:.2f}s"
    console.print(Panel(Text(body or "(empty)"), title=title, border_style=style))
    if result.routing is not None:
        console.print(
            f"routed to {result.entry_agent}: {result.routing.reason} {result.routing.scores}",
            style="dim",
        )
    if result.tree is not None:
        usage = result.usage
        console.print(
            Group(
                Text(
                    f"delegation tree · {usage.model_calls} model calls · tokens "
                    f"{usage.input_tokens} in / {usage.output_tokens} out",
                    style="bold",
                ),
                result_tree(result.tree),
            )
        )
