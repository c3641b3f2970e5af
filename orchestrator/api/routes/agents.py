"""`/v1/agents`: the team, where each replica runs, and who may delegate to whom."""

from __future__ import annotations

from fastapi import APIRouter, Response

from agents.core.guardrail_spec import GuardrailsSpec
from agents.core.placement import own_actors_reason
from orchestrator.api.deps import MERMAID, Service
from orchestrator.schemas import AgentsView, AgentView, ReplicaView, ScalingView, TopologyView
from orchestrator.system.topology import topology_flowchart

__all__ = ["router"]

router = APIRouter(tags=["agents"])


@router.get(
    "/agents/diagram",
    response_class=Response,
    responses={200: {"content": {MERMAID: {"schema": {"type": "string"}}}}},
)
async def agents_diagram(service: Service) -> Response:
    """Who may delegate to whom, as a Mermaid flowchart.

    Each agent's depth from the entry agent, cycles drawn thick, unreachable agents dashed.
    """
    system = service.system
    text = topology_flowchart(
        system.topology, system.config.limits.max_depth, f"{system.config.name} agents"
    )
    return Response(text, media_type=MERMAID)


@router.get("/agents")
async def agents(service: Service) -> AgentsView:
    """The configured agents, where each replica runs, and who may delegate to whom.

    Replicas are asked now: where they run and how busy they are.
    """
    system = service.system
    topology = system.topology
    placement: dict[str, list[ReplicaView]] = {}
    for replica in await service.views.placement():
        placement.setdefault(replica["agent"], []).append(ReplicaView.model_validate(replica))
    return AgentsView(
        system=system.config.name,
        agents=[
            AgentView(
                name=a.name,
                description=a.description,
                capabilities=list(a.capabilities),
                model=a.answered_by,
                tools=[t.function for t in a.tools],
                delegates=topology.delegates(a.name),
                handoffs=topology.handoffs(a.name),
                guardrails=guardrail_labels(a.guardrails),
                output_schema=a.output_schema,
                own_actors=own_actors_reason(a),
                replicas=placement.get(a.name, []),
            )
            for a in system.config.agents
        ],
        topology=TopologyView(
            entry=topology.entry,
            edges=[(a, b) for a, b in topology.graph.edges],
            handoffs=[(a, b) for a, b, h in topology.graph.edges(data="handoff") if h],
            cycles=topology.cycles(),
            max_static_depth=topology.max_static_depth(),
            max_depth=system.config.limits.max_depth,
        ),
        scaling=[ScalingView.model_validate(d) for d in await service.views.scaling()],
    )


def guardrail_labels(guardrails: GuardrailsSpec) -> list[str]:
    """An agent's guardrails as a person reads them: where each checks, and its name."""
    said = [f"input: {g.label}" for g in guardrails.input]
    said += [f"output: {g.label}" for g in guardrails.output]
    said += [f"tool {g.tool} {g.check} ({g.action}): {g.label}" for g in guardrails.tools]
    return said
