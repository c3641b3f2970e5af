"""`baton`: check agent systems and run tasks from the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.status import Status

from agents.errors import ConfigError
from orchestrator.client import ApiError, BatonClient
from orchestrator.config import AgentSystem, default_config_path, load_config
from orchestrator.errors import ServiceError
from orchestrator.report import (
    print_issues,
    print_run_view,
    print_runs,
    print_topology,
    print_trace,
)
from orchestrator.routing import AUTO
from orchestrator.schemas import RunRequest, RunView, run_view
from orchestrator.settings import Settings, is_loopback
from orchestrator.store import RunPage, RunStore, StoredRun
from tracing import OtlpExport, configure_tracing, otlp_export_from_env

if TYPE_CHECKING:
    from orchestrator.service import RunService, ServiceLimits

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
    if any(a.mcp for a in system.config.agents) and not asyncio.run(_check_mcp(system)):
        raise typer.Exit(1)
    console.print(f"{system.source}: ok", style="bold green")


async def _check_mcp(system: AgentSystem) -> bool:
    """Start (or reach) every MCP server of the config and list its tools, as agents will."""
    from agents.mcp_tools import admit_mcp_tools, open_mcp_tools
    from agents.tools import load_function_tool

    healthy = True
    for agent in system.config.agents:
        if not agent.mcp:
            continue
        servers, tools, problems = await open_mcp_tools(agent.mcp)
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
            healthy = healthy and not problems and not skipped
        finally:
            for server in servers:
                await server.close()
    return healthy


def _open_export() -> OtlpExport | None:
    try:
        return otlp_export_from_env(os.environ)
    except ValueError as exc:
        err.print(f"cannot export traces: {exc}", style="red")
        raise typer.Exit(2) from None


async def _open_store(url: str) -> RunStore:
    try:
        return await RunStore.open(url)
    except Exception as exc:
        err.print(f"cannot open the run store {url}: {type(exc).__name__}: {exc}", style="red")
        raise typer.Exit(2) from None


def _show_event(event: dict[str, Any]) -> None:
    kind, agent = event.get("type"), event.get("agent")
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


def _ask_person(event: dict[str, Any], status: Status) -> tuple[bool, str]:
    """A call waits for approval: ask at the terminal, or deny when there is none."""
    if not sys.stdin.isatty():
        return False, "no one to approve: baton run is not attached to a terminal"
    status.stop()
    try:
        console.print(
            f"[yellow]?[/] {event.get('agent')} wants to call [bold]{event.get('tool')}[/] "
            f"with {event.get('arguments')}"
        )
        approved = typer.confirm("approve this call?", default=False)
        message = "" if approved else typer.prompt("why not (told to the model)", default="")
        return approved, message
    finally:
        status.start()


def _local_service(
    settings: Settings, system: AgentSystem, role: str, limits: ServiceLimits | None = None
) -> AbstractAsyncContextManager[RunService]:
    """A run service in this process (`baton run`, `baton mcp`): agents on Ray, runs recorded
    in the store, as with `baton serve`."""
    from orchestrator.service import open_service  # Ray and litellm: slow imports

    return open_service(
        system,
        store_url=settings.store_url,
        ray_address=settings.ray_address,
        namespace=settings.namespace,
        owner=f"{role}:{socket.gethostname()}:{os.getpid()}",
        env={name: os.environ[name] for name in system.config.env if name in os.environ},
        export=_open_export(),
        limits=limits,
        forbid_remote_models=settings.forbid_remote_models,
    )


async def _run_here(
    settings: Settings, system: AgentSystem, request: RunRequest, progress: bool
) -> RunView:
    """Run through an in-process run service: the same life cycle and record as `baton serve`."""
    from orchestrator.service import ServiceLimits  # Ray and litellm: slow imports

    await (await _open_store(settings.store_url)).close()  # a clear error before Ray starts
    limits = ServiceLimits(max_concurrent_runs=1, max_queued_runs=0)
    async with _local_service(settings, system, "cli", limits) as service:
        run, _ = await service.submit(request)
        with console.status("starting Ray and the agents…") as status:
            async for item in service.events(run):
                if item is not None:
                    status.update("running…")
                    if progress:
                        _show_event(item[1])
                    if item[1].get("type") == "approval_requested":
                        approved, why = _ask_person(item[1], status)
                        with contextlib.suppress(ServiceError):  # decided already: fine
                            await service.decide(run.id, item[1]["call_id"], approved, why)
        return run_view(await service.get(run.id))


async def _run_there(
    server: str, api_key: str | None, body: dict[str, Any], progress: bool
) -> RunView:
    """Submit to a running service and follow its events."""
    async with BatonClient(server, api_key) as client:
        try:
            run = await client.submit(body)
            with console.status("running…") as status:
                async for event in client.events(run["id"]):
                    if progress:
                        _show_event(event)
                    if event.get("type") == "approval_requested":
                        approved, why = _ask_person(event, status)
                        with contextlib.suppress(ApiError):  # decided already: fine
                            await client.decide(run["id"], event["call_id"], approved, why)
            return RunView.model_validate(await client.get(run["id"]))
        except ApiError as exc:
            err.print(f"{server}: {exc}", style="red")
            raise typer.Exit(2) from None
        except httpx.TransportError as exc:
            err.print(f"cannot reach {server}: {type(exc).__name__}: {exc}", style="red")
            raise typer.Exit(2) from None


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
    server: Annotated[
        str | None,
        typer.Option(
            help="Submit to a running Baton service at this URL (default: $BATON_SERVER) "
            "instead of running here; its key comes from $BATON_API_KEY."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run as JSON.")] = False,
) -> None:
    """Run a task and print the answer and the delegation tree. Here: on Ray (a local instance
    unless RAY_ADDRESS is set), recorded in the run store; with --server: on that service."""
    settings = Settings()
    body = {"task": task, "agent": agent, "token_budget": budget, "deadline_s": deadline}
    try:
        request = RunRequest.model_validate(body)
    except ValidationError as exc:
        err.print(
            f"invalid run: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}", style="red"
        )
        raise typer.Exit(2) from None
    server = server or settings.server
    if server:
        view = asyncio.run(
            _run_there(server, settings.api_key, request.model_dump(exclude_none=True), not as_json)
        )
    else:
        system = _load(config, settings)
        if agent and agent != AUTO and agent not in system.topology.graph:
            err.print(
                f"unknown agent {agent!r}; agents: {', '.join(system.topology.graph)}", style="red"
            )
            raise typer.Exit(2)
        view = asyncio.run(_run_here(settings, system, request, not as_json))
    if as_json:
        typer.echo(view.model_dump_json(indent=2))
    else:
        print_run_view(console, view)
    raise typer.Exit(0 if view.status == "succeeded" else 1)


async def _serve_mcp_stdio(settings: Settings, system: AgentSystem) -> None:
    from orchestrator.mcp_server import build_mcp_server  # Ray, litellm, mcp: slow imports

    started: asyncio.Future[RunService] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def service() -> RunService:
        return await asyncio.shield(started)

    async def keep_service() -> None:
        try:
            async with _local_service(settings, system, "mcp") as running:
                started.set_result(running)
                await stop.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    server = build_mcp_server(service)
    # The MCP transport takes over stdin and stdout first (stray output goes to stderr), then
    # Ray and the agents start: a client can connect at once, and tools wait for the team.
    serving = asyncio.create_task(server.run_stdio_async())
    await asyncio.sleep(0)
    keeper = asyncio.create_task(keep_service())
    try:
        await serving
    finally:
        stop.set()
        with contextlib.suppress(BaseException):
            await keeper


@app.command()
def mcp(config: ConfigOption = None) -> None:
    """Serve the team as an MCP server over stdin/stdout, for MCP clients (IDEs, desktop
    assistants): tools to submit a task, get a run, get its diagram, list the agents. Runs are
    recorded in the run store, as with `baton run`."""
    settings = Settings()
    system = _load(config, settings)
    configure_tracing("orchestrator")
    asyncio.run(_serve_mcp_stdio(settings, system))


@app.command()
def serve(
    config: ConfigOption = None,
    host: Annotated[
        str | None, typer.Option(help="Address to listen on (default 127.0.0.1).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8000).")] = None,
) -> None:
    """Serve the HTTP API (and its agents on Ray) until stopped."""
    settings = Settings()
    host = host or settings.host
    port = settings.port if port is None else port
    keys = settings.accepted_keys()
    if not is_loopback(host) and not keys:
        err.print(
            f"refusing to listen on {host} without API keys: set BATON_API_KEYS "
            "(comma-separated) or BATON_API_KEYS_FILE, or listen on 127.0.0.1",
            style="red",
        )
        raise typer.Exit(2)
    system = _load(config, settings)

    import uvicorn  # slow imports (FastAPI, Ray, litellm), after the checks

    from orchestrator.api import ApiOptions, create_app
    from orchestrator.service import ServiceLimits, open_service

    configure_tracing("orchestrator", keys)  # the keys are secrets: never in a log or span
    env = {name: os.environ[name] for name in system.config.env if name in os.environ}
    export = _open_export()
    limits = ServiceLimits(
        max_concurrent_runs=settings.max_concurrent_runs,
        max_queued_runs=settings.max_queued_runs,
        lease_s=settings.lease_s,
        heartbeat_s=settings.sse_heartbeat_s,
    )

    def service() -> AbstractAsyncContextManager[RunService]:
        return open_service(
            system,
            store_url=settings.store_url,
            ray_address=settings.ray_address,
            namespace=settings.namespace,
            owner=settings.instance_id or f"{socket.gethostname()}:{port}",
            env=env,
            export=export,
            limits=limits,
            detached=True,
            forbid_remote_models=settings.forbid_remote_models,
        )

    api = create_app(
        system,
        service,
        ApiOptions(
            api_keys=keys,
            rate_limit_per_s=settings.rate_limit_per_s,
            rate_limit_burst=settings.rate_limit_burst,
            max_body_bytes=settings.max_body_bytes,
            mermaid_dist=settings.mermaid_dist,
            mcp_origins=settings.allowed_origins,
        ),
    )
    uvicorn.run(api, host=host, port=port, log_level="info", timeout_graceful_shutdown=10)


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
    print_run_view(console, run_view(stored))


def _stored_spans(settings: Settings, run_id: str) -> tuple[StoredRun, list[dict[str, Any]]]:
    """A stored run and its spans, or exit 1 saying it is not there."""

    async def fetch() -> tuple[StoredRun | None, list[dict[str, Any]]]:
        store = await _open_store(settings.store_url)
        try:
            return await store.get(run_id), await store.spans(run_id)
        finally:
            await store.close()

    stored, spans = asyncio.run(fetch())
    if stored is None:
        err.print(f"no run {run_id!r} in the store", style="red")
        raise typer.Exit(1)
    return stored, spans


RunIdArgument = Annotated[str, typer.Argument(help="A run id from `baton runs`.")]


@app.command("trace")
def trace_(run_id: RunIdArgument) -> None:
    """Print a stored run's span tree with timings, status and tokens."""
    _, spans = _stored_spans(Settings(), run_id)
    print_trace(console, spans)


@app.command()
def diagram(
    run_id: RunIdArgument,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to this file: .mmd (Mermaid text), .svg or .png (rendered in headless "
            "Chromium with the npm mermaid package, or by $MERMAID_INK_SERVER when set). "
            "Default: the text on stdout.",
        ),
    ] = None,
    detail: Annotated[
        str, typer.Option(help="agents; tools: function tools too; full: models too.")
    ] = "agents",
    page: Annotated[int, typer.Option(min=1, help="Page of a run too large for one.")] = 1,
) -> None:
    """Draw a stored run as a Mermaid sequence diagram, from its spans."""
    from orchestrator.render import RenderError, render_diagram
    from tracing.sequence import Detail, sequence_diagram

    if detail not in ("agents", "tools", "full"):
        err.print(f"--detail must be agents, tools or full, not {detail!r}", style="red")
        raise typer.Exit(2)
    settings = Settings()
    stored, spans = _stored_spans(settings, run_id)
    drawn = sequence_diagram(
        spans, detail=cast("Detail", detail), page=page, title=f"Run {stored.id[:12]}"
    )
    for fold in drawn.folded:
        err.print(f"note: {fold}", style="dim")
    suffix = output.suffix.lower() if output is not None else ""
    if output is None:
        typer.echo(drawn.text, nl=False)
        return
    if suffix in (".mmd", ".mermaid"):
        output.write_text(drawn.text, encoding="utf-8")
    elif suffix in (".svg", ".png"):
        try:
            picture = render_diagram(
                drawn.text,
                "svg" if suffix == ".svg" else "png",
                ink_server=settings.mermaid_ink_server,
                chromium=settings.chromium,
                mermaid_dist=settings.mermaid_dist,
            )
        except RenderError as exc:
            err.print(f"cannot render {output}: {exc}", style="red")
            raise typer.Exit(2) from None
        output.write_bytes(picture)
    else:
        err.print(f"{output}: write .mmd, .svg or .png", style="red")
        raise typer.Exit(2)
    err.print(f"wrote {output} (page {drawn.page} of {drawn.pages})")


def main() -> None:
    app()
