"""Models: the client seam the tool loop uses (`base`), litellm behind it (`client`), and
Baton's built-in offline and scripted models (`providers`).

Only the seam is exported here: `agents.models.safety` runs in every Ray worker at start-up and
must not pull in litellm through this package.
"""

from agents.models.base import ModelClient, ModelReply, ToolCall, tool_schema

__all__ = ["ModelClient", "ModelReply", "ToolCall", "tool_schema"]
