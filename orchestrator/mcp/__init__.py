"""Baton as an MCP server: the team as tools over streamable HTTP (`/mcp`) and stdio."""

from orchestrator.mcp.server import build_mcp_server, mcp_http_app

__all__ = ["build_mcp_server", "mcp_http_app"]
