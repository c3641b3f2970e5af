"""Models: the seam the tool loop uses, litellm behind it, and Baton's built-in models.

`base` is the seam, `client` the litellm client, `providers` the built-in offline and scripted
models.

Only the seam is exported here: `agents.models.safety` runs in every Ray worker at start-up and
must not pull in litellm through this package.
"""

from agents.models.base import ModelClient, ModelReply, ToolCall, tool_schema

__all__ = ["ModelClient", "ModelReply", "ToolCall", "tool_schema"]
