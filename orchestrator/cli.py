"""`baton`: check agent systems and run tasks from the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from agents.errors import ConfigError
from orchestrator.config import AgentSystem, default_config_path, load_config
from orchestrator.engine import Engine, RunResult, connect_ray
from orchestrator.report import (
    print_issues,
    print_run,
    print_runs,
    print_stored_run,
    print_topology,
    print_trace,
)
from orchestrator.settings import Settings
from orchestrator.store import RunPage, RunStore, StoredRun
from tracing import OtlpExport, otlp_export_from_env

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


async def _follow(engine: Engine, run_id: str, job: asyncio.Future[RunResult]) -> RunResult:
    """Print progress events until the run ends."""
    seen = 0
    with console.status("running…") as status:
        while True:
            await asyncio.wait({job}, timeout=0.1)
            with contextlib.suppress(Exception):  # progress is best effort
                events = await engine.events(run_id, seen)
                seen += len(events)
                # Batches from different actors arrive in any order; show each poll in time order.
                for event in sorted(events, key=lambda e: e["ts"]):
                    _show_event(event)
                status.update(f"running… {seen} events")
            if job.done():
                return job.result()


async def _execute(
    settings: Settings,
    system: AgentSystem,
    env: dict[str, str],
    task: str,
    options: dict[str, Any],
    progress: bool,
) -> RunResult:
    """Record the run in the store, run it on Ray, and record how it ended."""
    store = await _open_store(settings.store_url)
    export = _open_export()
    run_id = uuid.uuid4().hex
    try:
        config = system.config
        await store.add(
            run_id,
            task,
            agent=options["agent"],
            system=config.name,
            config=system.public_config(),
        )
        with console.status("starting Ray and the agents…"):
            connect_ray(settings.ray_address, settings.namespace)
            engine = Engine(system, namespace=settings.namespace, env=env, export=export)
            await asyncio.to_thread(engine.start)
        await store.start(run_id)
        job = asyncio.ensure_future(engine.run(task, run_id=run_id, **options))
        try:
            result = await (_follow(engine, run_id, job) if progress else job)
        except BaseException as exc:  # Ctrl-C included: the run is recorded, not lost
            await store.fail(run_id, f"{type(exc).__name__}: {exc}".rstrip(": "))
            raise
        await store.finish(result)
        return result
    finally:
        await store.close()
        if export is not None:
            await asyncio.to_thread(export.shutdown)  # sends what is queued before exiting


async def _open_store(url: str) -> RunStore:
    try:
        return await RunStore.open(url)
    except Exception as exc:
        err.print(f"cannot open the run store {url}: {type(exc).__name__}: {exc}", style="red")
        raise typer.Exit(2) from None


def _open_export() -> OtlpExport | None:
    try:
        return otlp_export_from_env(os.environ)
    except ValueError as exc:
        err.print(f"cannot export traces: {exc}", style="red")
        raise typer.Exit(2) from None


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
    options = {"agent": agent, "token_budget": budget, "deadline_s": deadline}
    result = asyncio.run(_execute(settings, system, env, task, options, progress=not as_json))
    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        print_run(console, result)
    raise typer.Exit(0 if result.status == "succeeded" else 1)


@app.command()
def runs(
    status: Annotated[str | None, typer.Option(help="Only runs with this status.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only runs with this entry agent.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many runs.")] = 20,
) -> None:
    """List stored runs, newest first."""

    async def fetch() -> RunPage:
        store = await _open_store(Settings().store_url)
        try:
            return await store.list(status=status, agent=agent, limit=limit)
        finally:
            await store.close()

    print_runs(console, asyncio.run(fetch()))


@app.command()
def show(run_id: Annotated[str, typer.Argument(help="A run id from `baton runs`.")]) -> None:
    """Print a stored run: its answer or error, usage, and delegation tree."""

    async def fetch() -> StoredRun | None:
        store = await _open_store(Settings().store_url)
        try:
            return await store.get(run_id)
        finally:
            await store.close()

    stored = asyncio.run(fetch())
    if stored is None:
        err.print(f"no run {run_id!r} in the store", style="red")
        raise typer.Exit(1)
    print_stored_run(console, stored)


@app.command("trace")
def trace_(run_id: Annotated[str, typer.Argument(help="A run id from `baton runs`.")]) -> None:
    """Print a stored run's span tree with timings, status and tokens."""

    async def fetch() -> tuple[StoredRun | None, list[dict[str, Any]]]:
        store = await _open_store(Settings().store_url)
        try:
            return await store.get(run_id), await store.spans(run_id)
        finally:
            await store.close()

    stored, spans = asyncio.run(fetch())
    if stored is None:
        err.print(f"no run {run_id!r} in the store", style="red")
        raise typer.Exit(1)
    print_trace(console, spans)


def main() -> None:
    app()
