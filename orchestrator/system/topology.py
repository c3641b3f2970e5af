"""The delegation graph (who may delegate to whom), built once with networkx.

The static checks, the router's fallback, `baton check` and the actors' allow-lists use it.
networkx is imported where a graph is built or searched: commands that only read the store
(`baton runs`, `baton show`, `baton --help`) load this module through `orchestrator` and never
need it (a tenth of a second at every start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents.core.spec import AgentSpec
from tracing.mermaid_text import label, mermaid_modules
from tracing.mermaid_text import title as diagram_title

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["Topology", "build_topology", "topology_flowchart"]

MAX_REPORTED_CYCLES = 10


@dataclass(frozen=True)
class Topology:
    """A directed graph with an edge `a -> b` when agent `a` may delegate (or hand over) to `b`.

    Each edge says which: `delegate` and `handoff` (both may hold).
    """

    graph: nx.DiGraph
    entry: str

    def delegates(self, agent: str) -> list[str]:
        """The agents `agent` may delegate to."""
        return [t for t in self.graph.successors(agent) if self.graph.edges[agent, t]["delegate"]]

    def handoffs(self, agent: str) -> list[str]:
        """The agents `agent` may hand the conversation over to."""
        return [t for t in self.graph.successors(agent) if self.graph.edges[agent, t]["handoff"]]

    def cycles(self) -> list[list[str]]:
        """Up to `MAX_REPORTED_CYCLES` elementary cycles, each starting at its smallest name."""
        import networkx as nx

        found = []
        for cycle in nx.simple_cycles(self.graph):
            start = cycle.index(min(cycle))
            found.append(cycle[start:] + cycle[:start])
            if len(found) >= MAX_REPORTED_CYCLES:
                break
        return sorted(found)

    def unreachable(self) -> list[str]:
        """Agents no chain from the entry agent reaches."""
        import networkx as nx

        if self.entry not in self.graph:
            return []
        reached = nx.descendants(self.graph, self.entry) | {self.entry}
        return [n for n in self.graph.nodes if n not in reached]

    def max_static_depth(self) -> int | None:
        """Agents on the longest delegation chain from the entry; None when a cycle is reachable."""
        import networkx as nx

        if self.entry not in self.graph:
            return None
        reachable = self.graph.subgraph(nx.descendants(self.graph, self.entry) | {self.entry})
        if not nx.is_directed_acyclic_graph(reachable):
            return None
        return int(nx.dag_longest_path_length(reachable)) + 1


def build_topology(agents: list[AgentSpec], entry: str) -> Topology:
    """The graph of the declared delegations; unknown targets are left out (checks name them)."""
    import networkx as nx

    graph = nx.DiGraph()
    names = [a.name for a in agents]
    graph.add_nodes_from(names)
    known = set(names)
    for agent in agents:
        callees = agent.callees  # (a workflow's shape names those it calls)
        targets = (
            [n for n in names if n != agent.name]
            if callees == "*"
            else [t for t in callees if t in known and t != agent.name]
        )
        handoffs = [t for t in agent.handoffs if t in known]
        for target in dict.fromkeys([*targets, *handoffs]):  # in the config's order
            graph.add_edge(
                agent.name, target, delegate=target in targets, handoff=target in handoffs
            )
    return Topology(graph=graph, entry=entry)


def topology_flowchart(topology: Topology, max_depth: int, title: str = "Agents") -> str:
    """Who may delegate to whom, as Mermaid flowchart text.

    The entry agent first, each agent with its depth on the shortest chain from the entry, edges
    on a cycle drawn thick and labelled, hand-offs dotted and labelled, unreachable agents
    dashed, and the runtime depth limit in the title.
    """
    import networkx as nx

    _, flowchart = mermaid_modules()
    graph = topology.graph
    depth = (
        nx.single_source_shortest_path_length(graph, topology.entry)
        if topology.entry in graph
        else {}
    )
    cyclic = {
        (a, b)
        for cycle in topology.cycles()
        for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)
    }
    entry_style = flowchart.Style("entry", fill="#dbeafe", stroke="#1d4ed8", stroke_width="2px")
    lost_style = flowchart.Style("unreachable", fill="#f3f4f6", other="stroke-dasharray: 4 4")
    nodes = {}
    for i, name in enumerate(sorted(graph.nodes, key=lambda n: (depth.get(n, 1_000), n)), 1):
        where = f"depth {depth[name] + 1}" if name in depth else "unreachable"
        styles = [entry_style] if name == topology.entry else []
        if name not in depth:
            styles = [lost_style]
        nodes[name] = flowchart.Node(
            f"n{i}",  # never a Mermaid keyword, whatever the agent is called
            f"{label(name, 48)} · {where}",
            shape="stadium-shape" if name == topology.entry else "round-edge",
            styles=styles,
        )
    links = [
        _link(flowchart, nodes[a], nodes[b], graph.edges[a, b], (a, b) in cyclic)
        for a, b in graph.edges
    ]
    longest = topology.max_static_depth()
    chain = f"longest chain {longest}" if longest is not None else "cycles, unbounded chains"
    heading = diagram_title(f"{title} · entry {topology.entry} · {chain} · max_depth {max_depth}")
    chart = flowchart.FlowChart(heading, list(nodes.values()), links, orientation="LR")
    return str(chart.script)


def _link(flowchart: Any, a: Any, b: Any, edge: dict[str, bool], cyclic: bool) -> Any:
    """One edge: a delegation, a hand-off (dotted), or both; thick on a cycle."""
    said = ["delegates"] if edge["delegate"] and edge["handoff"] else []
    if edge["handoff"]:
        said.append("hands over")
    if cyclic:
        said.append("cycle")
    shape = "thick" if cyclic else "normal" if edge["delegate"] else "dotted"
    return flowchart.Link(a, b, shape=shape, message=", ".join(said))
