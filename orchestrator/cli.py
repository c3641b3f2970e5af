"""`baton`: check agent systems and run tasks from the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from agents.errors import ConfigError
from orchestrator.config import AgentSystem, default_config_path, load_config
from orchestrator.engine import Engine, RunResult, connect_ray
from orchestrator.report import print_issues, print_run, print_topology
from orchestrator.settings import Settings

__all__ = ["app", "main"]

app = typer.Typer(
    help="Baton: multi-agent orchestration on Ray.", no_args_is_help=True, add_completion=False
)
console = Console()
err = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="Agent-system YAML (default: $BATON_CONFIG or configs/default.yaml)."
    ),
]


def _load(path: Path | None, settings: Settings) -> AgentSystem:
    path = path or settings.config or default_config_path()
    try:
        system = load_config(path)
    except ConfigError as exc:
        print_issues(err, exc.issues)
        err.print(
            f"{path}: {sum(i.severity == 'error' for i in exc.issues)} error(s)", style="bold red"
        )
        raise typer.Exit(2) from None
    print_issues(err, system.warnings)
    return system


@app.command()
def check(path: Annotated[Path | None, typer.Argument(help="Agent-system YAML.")] = None) -> None:
    """Validate an agent system and print its topology, or every error found."""
    system = _load(path, Settings())
    print_topology(console, system)
    console.print(f"{system.source}: ok", style="bold green")


async def _run_with_progress(
    engine: Engine, task: str, agent: str | None, budget: int | None, deadline: float | None
) -> RunResult:
    import uuid

    run_id = uuid.uuid4().hex
    job = asyncio.ensure_future(
        engine.run(task, agent=agent, run_id=run_id, token_budget=budget, deadline_s=deadline)
    )
    seen = 0
    with console.status("running…") as status:
        while True:
            await asyncio.wait({job}, timeout=0.1)
            with contextlib.suppress(Exception):  # progress is best effort
                events = await engine.events(run_id, seen)
                seen += len(events)
                for event in events:
                    _show_event(event)
                status.update(f"running… {seen} events")
            if job.done():
                return job.result()


def _show_event(event: dict[str, Any]) -> None:
    kind, agent = event["type"], event["agent"]
    if kind == "agent_started":
        console.print(
            f"[cyan]→[/] {agent}" + (f" (from {event['caller']})" if event.get("caller") else "")
        )
    elif kind == "agent_finished":
        console.print(
            f"[cyan]←[/] {agent} {event['status']} in {event['duration_s'] * 1000:.0f} ms"
        )
    elif kind == "delegation_refused":
        console.print(f"[yellow]⊘[/] {agent} -> {event['target']}: {event['message']}")


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What the team should do.")],
    agent: Annotated[
        str | None,
        typer.Option("--agent", "-a", help="Entry agent, or 'auto' to route by capabilities."),
    ] = None,
    config: ConfigOption = None,
    budget: Annotated[int | None, typer.Option(help="Run-wide token budget.")] = None,
    deadline: Annotated[float | None, typer.Option(help="Run deadline in seconds.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run a task on Ray (a local instance unless RAY_ADDRESS is set) and print the result."""
    settings = Settings()
    system = _load(config, settings)
    if agent and agent != "auto" and agent not in system.topology.graph:
        err.print(
            f"unknown agent {agent!r}; agents: {', '.join(system.topology.graph)}", style="red"
        )
        raise typer.Exit(2)
    env = {name: os.environ[name] for name in system.config.env if name in os.environ}
    with console.status("starting Ray and the agents…"):
        connect_ray(settings.ray_address, settings.namespace)
        engine = Engine(system, namespace=settings.namespace, env=env)
        engine.start()
    if as_json:
        result = asyncio.run(
            engine.run(task, agent=agent, token_budget=budget, deadline_s=deadline)
        )
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        result = asyncio.run(_run_with_progress(engine, task, agent, budget, deadline))
        print_run(console, result)
    raise typer.Exit(0 if result.status == "succeeded" else 1)


def main() -> None:
    app()
