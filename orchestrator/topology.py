"""The delegation graph (who may delegate to whom), built once with networkx and used by the
static checks, the router's fallback, `baton check`, and the actors' allow-lists.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from agents.spec import AgentSpec

__all__ = ["Topology", "build_topology"]

MAX_REPORTED_CYCLES = 10


@dataclass(frozen=True)
class Topology:
    """A directed graph with an edge `a -> b` when agent `a` may delegate to agent `b`."""

    graph: nx.DiGraph
    entry: str

    def delegates(self, agent: str) -> list[str]:
        return list(self.graph.successors(agent))

    def cycles(self) -> list[list[str]]:
        """Up to `MAX_REPORTED_CYCLES` elementary cycles, each starting at its smallest name."""
        found = []
        for cycle in nx.simple_cycles(self.graph):
            start = cycle.index(min(cycle))
            found.append(cycle[start:] + cycle[:start])
            if len(found) >= MAX_REPORTED_CYCLES:
                break
        return sorted(found)

    def unreachable(self) -> list[str]:
        if self.entry not in self.graph:
            return []
        reached = nx.descendants(self.graph, self.entry) | {self.entry}
        return [n for n in self.graph.nodes if n not in reached]

    def max_static_depth(self) -> int | None:
        """Agents on the longest delegation chain from the entry; None when a cycle is reachable."""
        if self.entry not in self.graph:
            return None
        reachable = self.graph.subgraph(nx.descendants(self.graph, self.entry) | {self.entry})
        if not nx.is_directed_acyclic_graph(reachable):
            return None
        return int(nx.dag_longest_path_length(reachable)) + 1


def build_topology(agents: list[AgentSpec], entry: str) -> Topology:
    """The graph of the declared delegations; unknown targets are left out (checks name them)."""
    graph = nx.DiGraph()
    names = [a.name for a in agents]
    graph.add_nodes_from(names)
    known = set(names)
    for agent in agents:
        targets = (
            [n for n in names if n != agent.name]
            if agent.delegates == "*"
            else [t for t in agent.delegates if t in known]
        )
        graph.add_edges_from((agent.name, t) for t in targets)
    return Topology(graph=graph, entry=entry)
