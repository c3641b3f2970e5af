"""Tools an agent may call: Python functions, file tools, MCP servers' tools, and delegations."""

from agents.core.state import State, StateError
from agents.tools.base import (
    IDEMPOTENCY_KEY,
    FunctionTool,
    Tool,
    ToolCallContext,
    ToolContext,
    ToolOutput,
    idempotent,
    load_function_tool,
    load_tool,
)

__all__ = [
    "IDEMPOTENCY_KEY",
    "FunctionTool",
    "State",
    "StateError",
    "Tool",
    "ToolCallContext",
    "ToolContext",
    "ToolOutput",
    "idempotent",
    "load_function_tool",
    "load_tool",
]
