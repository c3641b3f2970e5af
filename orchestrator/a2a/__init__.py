"""Baton as an A2A agent (Agent2Agent protocol): its card, and its JSON-RPC methods over runs.

`a2a_routes` gives the routes `baton serve` adds; `agents.remote` is the client side (an agent
of a system that is another system reached over A2A).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.types import AgentCard
from starlette.routing import Route
from typing_extensions import override

from orchestrator.a2a.card import RPC_PATH, agent_card
from orchestrator.a2a.handler import BatonRequestHandler
from orchestrator.a2a.strict import StrictRequests
from orchestrator.service import RunService
from orchestrator.system.config import AgentSystem

__all__ = ["RPC_PATH", "a2a_routes", "agent_card"]


class _CallersMistakes(logging.Filter):
    """Drops the SDK's traceback of a malformed request (a client's mistake, logged at ERROR).

    The one-line `Request Error ... Code=-32600/-32602` warning it logs next says it all.
    """

    QUIET = frozenset(
        {"Failed to validate base JSON-RPC request", "Failed to parse request params"}
    )

    @override
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in self.QUIET


_DISPATCHER_LOG = logging.getLogger("a2a.server.routes.jsonrpc_dispatcher")
if not any(isinstance(f, _CallersMistakes) for f in _DISPATCHER_LOG.filters):
    _DISPATCHER_LOG.addFilter(_CallersMistakes())


def a2a_routes(
    system: AgentSystem,
    current: Callable[[], Awaitable[RunService]],
    base_url: str,
    secured: bool,
    blocking_wait_s: float | None = None,
    push_private: bool = False,
) -> tuple[list[Route], list[Route]]:
    """The agent card's route (public), and the JSON-RPC endpoint's (to guard like `/v1`).

    The endpoint speaks A2A 1.0, and 0.3 to clients that send no `A2A-Version` header (the
    a2a-sdk's compatibility layer), as the card's two interfaces say.
    """
    cards = {system.version: agent_card(system, base_url, secured)}

    async def newest(_: AgentCard) -> AgentCard:
        # The card of the version new runs go to (a new one may have started: `roll`).
        newest = (await current()).system
        if newest.version not in cards:
            cards.clear()
            cards[newest.version] = agent_card(newest, base_url, secured)
        return cards[newest.version]

    handler = BatonRequestHandler(current, blocking_wait_s, push_private)
    rpc = create_jsonrpc_routes(handler, RPC_PATH, enable_v0_3_compat=True)
    strict = [Route(r.path, StrictRequests(r.app), methods=r.methods) for r in rpc]
    return create_agent_card_routes(cards[system.version], newest), strict
