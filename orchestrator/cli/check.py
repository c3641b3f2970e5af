"""`baton check`: validate an agent system, and reach its MCP servers and remote agents."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated, TextIO

import typer

from agents.core.spec import AgentSpec
from orchestrator.cli.common import app, console, err, load_system
from orchestrator.cli.report import print_topology
from orchestrator.settings import Settings
from orchestrator.system.config import AgentSystem

__all__ = ["check"]


@app.command()
def check(
    path: Annotated[Path | None, typer.Argument(help="Agent-system YAML.")] = None,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Validate without starting or contacting the MCP servers and remote (A2A) "
            "agents the config names.",
            metavar="",
        ),
    ] = False,
) -> None:
    """Validate an agent system and print its topology, or every error found.

    Unless --offline, every MCP server the config names is started (stdio) or reached (HTTP)
    and asked for its tools: a config is as trusted as code; every remote agent's card is
    fetched. Tools named by import path are imported either way.
    """
    system = load_system(path, Settings())
    print_topology(console, system)
    _print_tools(system)
    outside = any(a.mcp or a.a2a for a in system.config.agents)
    if outside and offline:
        console.print("MCP servers and remote agents not contacted (--offline)", style="yellow")
    elif outside and not all(asyncio.run(_reach(system))):
        raise typer.Exit(1)
    console.print(f"{system.source}: ok", style="bold green")


def _print_tools(system: AgentSystem) -> None:
    """Each function tool with what its model is told of each parameter (a warning: nothing).

    Descriptions come from `Field(description=...)`, `Annotated[T, "text"]` and the docstring
    (Google's `Args:`, NumPy's `Parameters`, Sphinx's `:param:`).
    """
    from agents.tools.base import load_function_tool, parameter_descriptions

    seen: set[str] = set()
    for agent in system.config.agents:
        for ref in agent.tools:
            if ref.function in seen:
                continue
            seen.add(ref.function)
            tool = load_function_tool(ref.function)
            described = parameter_descriptions(tool)
            shown = ", ".join(f"{name}: {said or '-'}" for name, said in described.items())
            console.print(f"tool {tool.name}({shown})", markup=False, soft_wrap=True)
            for name in (n for n, said in described.items() if not said):
                err.print(
                    f"warning: tool {tool.name} ({ref.function}): parameter {name!r} has no "
                    "description: the model sees its name only (say it in the docstring's "
                    'Args, or with Annotated[T, "..."])',
                    style="yellow",
                    markup=False,
                )


async def _reach(system: AgentSystem) -> tuple[bool, bool]:
    return await _check_mcp(system), await _check_remote(system)


async def _check_remote(system: AgentSystem) -> bool:
    """Fetch every remote agent's card, as its host will; say what it offers or why not."""
    import os

    import httpx
    from a2a.client import A2ACardResolver

    healthy = True
    for agent in system.config.agents:
        if agent.a2a is None:
            continue
        remote = agent.a2a
        headers = {name: os.environ.get(var, "") for name, var in remote.headers.items()}
        try:
            async with httpx.AsyncClient(headers=headers, timeout=remote.connect_timeout_s) as http:
                card = await A2ACardResolver(http, remote.url).get_agent_card()
        except Exception as exc:
            err.print(f"{agent.name}: cannot reach the A2A agent at {remote.url}: {exc}")
            healthy = False
            continue
        skills = ", ".join(s.id for s in card.skills) or "no skills listed"
        console.print(f"{agent.name}: A2A agent {card.name!r} at {remote.url} ({skills})")
    return healthy


async def _check_mcp(system: AgentSystem) -> bool:
    """Start (or reach) every MCP server of the config and list its tools, as agents will.

    The servers' own stderr (banners, logs) is kept aside and shown only when one fails.
    """
    healthy = True
    for agent in system.config.agents:
        if agent.mcp:
            with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
                problems = await _check_agent_mcp(agent, errlog)
                errlog.seek(0)
                said = errlog.read().strip()
            if problems and said:
                err.print(f"{agent.name}: what the MCP servers said on stderr:", style="dim")
                err.print(said[-2000:], markup=False, highlight=False)
            healthy = healthy and not problems
    return healthy


async def _check_agent_mcp(agent: AgentSpec, errlog: TextIO) -> int:
    """List one agent's MCP tools by server; return how many problems were found."""
    from agents.tools.base import load_function_tool
    from agents.tools.mcp import admit_mcp_tools, open_mcp_tools

    servers, tools, problems = await open_mcp_tools(agent.mcp, errlog=errlog)
    try:
        taken = {load_function_tool(t.function).name for t in agent.tools}
        usable, skipped = admit_mcp_tools(tools, taken)
        for spec in agent.mcp:
            if spec.name in problems:
                err.print(f"{agent.name}: MCP server {spec.name}: {problems[spec.name]}")
                continue
            names = [t.name for t in usable if t.server.spec is spec]
            console.print(f"{agent.name}: MCP server {spec.name}: {', '.join(names) or '-'}")
        for problem in skipped:
            err.print(f"{agent.name}: {problem}")
    finally:
        for server in servers:
            await server.close()
    return len(problems) + len(skipped)
