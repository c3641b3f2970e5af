"""The agent card of an agent system: what an A2A client learns before it sends a message."""

from __future__ import annotations

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    SecurityRequirement,
    StringList,
)
from a2a.utils.constants import (
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_CURRENT,
    TransportProtocol,
)

from orchestrator import __version__
from orchestrator.system.config import AgentSystem

__all__ = ["RPC_PATH", "agent_card"]

# Where the JSON-RPC endpoint is served (the card at `/.well-known/agent-card.json`).
RPC_PATH = "/a2a"
_TEXT = ["text/plain"]


def agent_card(system: AgentSystem, base_url: str, secured: bool) -> AgentCard:
    """The system as one A2A agent: one skill per agent (its description and capabilities).

    Args:
        system: the agent system served.
        base_url: where the service is reached (`http://host:port`).
        secured: the service takes API keys: the card says to send one as a bearer token.
    """
    config = system.config
    entry = system.agent(system.entry)
    skills = [
        AgentSkill(
            id=agent.name,
            name=agent.name,
            description=agent.description or agent.name,
            tags=list(agent.capabilities) or [agent.name],
            input_modes=_TEXT,
            output_modes=_TEXT,
        )
        for agent in config.agents
    ]
    card = AgentCard(
        name=config.name,
        description=entry.description or f"The Baton agent system {config.name}.",
        # One endpoint, two versions: 1.0, and 0.3 for clients that send no `A2A-Version`
        # (the card then carries 0.3's `url` and `protocolVersion` fields as well).
        supported_interfaces=[
            AgentInterface(
                url=base_url.rstrip("/") + RPC_PATH,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=version,
            )
            for version in (PROTOCOL_VERSION_CURRENT, PROTOCOL_VERSION_0_3)
        ],
        version=__version__,
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=_TEXT,
        default_output_modes=_TEXT,
        skills=skills,
    )
    if secured:
        scheme = card.security_schemes["bearer"].http_auth_security_scheme
        scheme.scheme = "Bearer"
        scheme.description = "A Baton API key."
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card
