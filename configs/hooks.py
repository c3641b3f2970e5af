"""An example hook for `configs/support.yaml`: an audit trail of tool calls, and a veto.

Hooks run in the agent's process; see `agents.runtime.hooks.Hooks` for every method.
"""

from __future__ import annotations

import logging
from typing import Any

from agents.runtime.hooks import HookContext, Hooks, Veto

__all__ = ["AuditTrail"]

logger = logging.getLogger("baton.audit")


class AuditTrail(Hooks):
    """Logs every tool call an agent makes; refuses tools whose name says they delete."""

    async def before_tool(
        self, ctx: HookContext, tool: str, arguments: dict[str, Any]
    ) -> Veto | None:
        """Log the call; veto it if it deletes."""
        logger.info("run %s: %s calls %s %s", ctx.run_id, ctx.agent, tool, sorted(arguments))
        if tool.startswith("delete_"):
            return Veto("deleting needs a person: ask them instead")
        return None
