from __future__ import annotations

from agents.core.spec import AgentCard
from orchestrator.system.routing import route

CARDS = [
    AgentCard(name="coordinator", description="Plans work", capabilities=("planning",)),
    AgentCard(
        name="analyst",
        description="Numbers and arithmetic",
        capabilities=("calculate", "statistics"),
    ),
    AgentCard(name="writer", description="Drafts reports", capabilities=("writing", "summary")),
]


def test_auto_routing_picks_the_best_capability_match_and_records_scores() -> None:
    decision = route("Calculate the statistics of these numbers", CARDS, "coordinator")
    assert decision.agent == "analyst"
    assert decision.scores["analyst"] > decision.scores["writer"] == 0


def test_auto_routing_falls_back_to_the_entry_agent_when_nothing_matches() -> None:
    decision = route("Hello there", CARDS, "coordinator")
    assert decision.agent == "coordinator"
    assert "no capability matched" in decision.reason
