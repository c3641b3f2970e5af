"""`baton run`: run a task here (an in-process run service) or on a running service."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import httpx
import typer
from pydantic import ValidationError

from agents.core.events import Event
from orchestrator.cli.client import ApiError, BatonClient
from orchestrator.cli.common import (
    AgentOption,
    ConfigOption,
    JsonOption,
    LocalOption,
    ServerOption,
    VerboseOption,
    app,
    console,
    echo,
    err,
    load_system,
    open_export,
    open_store,
    otlp_export_asked,
    progress,
)
from orchestrator.cli.discovery import find_server
from orchestrator.cli.follow import (
    QUIET,
    Display,
    WordRefused,
    follow,
    person_here,
    person_there,
)
from orchestrator.cli.report import print_run_view
from orchestrator.errors import ServiceError
from orchestrator.schemas import RunRequest, RunView, run_view
from orchestrator.settings import Settings
from orchestrator.system.config import AgentSystem
from orchestrator.system.routing import AUTO

if TYPE_CHECKING:
    from orchestrator.service import RunService, ServiceLimits
    from orchestrator.store import StoredRun

__all__ = ["local_service", "replay", "resume", "run"]


def local_service(
    settings: Settings, system: AgentSystem, role: str, limits: ServiceLimits | None = None
) -> AbstractAsyncContextManager[RunService]:
    """A run service in this process (`baton run`, `baton mcp`).

    Agents on Ray, runs recorded in the store, as with `baton serve`.
    """
    from orchestrator.service import ServiceLimits
    from orchestrator.serving import open_service_from_settings  # Ray: a slow import

    owner = f"{role}:{socket.gethostname()}:{os.getpid()}"
    # A one-shot service: the runs other instances left are theirs (or a server's) to resume.
    limits = dataclasses.replace(limits or ServiceLimits(), adopts_lost_runs=False)
    return open_service_from_settings(
        settings, system, owner=owner, export=open_export(), limits=limits
    )


async def _run_here(
    settings: Settings,
    system: AgentSystem,
    start: Callable[[RunService], Awaitable[StoredRun]],
    display: Display,
) -> RunView:
    """Run through an in-process run service: the same life cycle and record as `baton serve`."""
    from orchestrator.service.run_service import ServiceLimits  # Ray: a slow import

    await (await open_store(settings.store_url)).close()  # a clear error before Ray starts
    limits = ServiceLimits(max_concurrent_runs=1, max_queued_runs=0)
    async with local_service(settings, system, "cli", limits) as service:
        trace_export = service.engine.trace_export
        run = await start(service)

        async def events() -> AsyncIterator[Event | None]:
            async for item in service.events.follow(run):
                yield item[1] if item is not None else None

        with progress().status("starting Ray and the agents…") as status:
            await follow(events(), status, display, person_here(service, run.id))
        view = run_view(await service.get(run.id))
    _say_where_the_trace_went(None, trace_export)
    return view


async def _run_there(
    server: str,
    api_key: str | None,
    start: Callable[[BatonClient], Awaitable[dict[str, Any]]],
    display: Display,
) -> RunView:
    """Submit to (or resume on) a running service and follow its events."""
    async with BatonClient(server, api_key) as client:
        try:
            run = await start(client)

            person = person_there(client, run["id"])
            with progress().status("running…") as status:
                try:
                    await follow(client.events(run["id"]), status, display, person)
                except WordRefused as refused:
                    err.print(
                        f"your word was refused: {refused}. Run {run['id']} waits for someone "
                        "who may give it",
                        style="yellow",
                        markup=False,
                    )
                    raise typer.Exit(1) from None
            view = RunView.model_validate(await client.get(run["id"]))
            _say_where_the_trace_went(server, (await client.service()).get("trace_export"))
            return view
        except ApiError as exc:
            err.print(f"{server}: {exc}", style="red")
            raise typer.Exit(2) from None
        except httpx.TransportError as exc:
            err.print(f"cannot reach {server}: {type(exc).__name__}: {exc}", style="red")
            raise typer.Exit(2) from None


def _read_input(path: Path) -> Any:
    """The JSON in `path` (exits 2 saying what is wrong with the file, and where)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        err.print(f"--input {path}: {exc.strerror}", style="red", markup=False)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = (
            f" (line {exc.lineno}, column {exc.colno})"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        err.print(f"--input {path}: not JSON{where}: {exc}", style="red", markup=False)
    raise typer.Exit(2)


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What the team should do.")],
    agent: AgentOption = None,
    config: ConfigOption = None,
    budget: Annotated[int | None, typer.Option(help="Run-wide token budget.")] = None,
    deadline: Annotated[float | None, typer.Option(help="Run deadline in seconds.")] = None,
    thread: Annotated[
        str | None,
        typer.Option(
            help="Run it as the next turn of this thread (its entry agent sees the earlier "
            "turns); `new`: of a new thread. The thread's id is printed to continue it.",
        ),
    ] = None,
    server: ServerOption = None,
    local: LocalOption = False,
    as_json: JsonOption = False,
    verbose: VerboseOption = False,
    stream: Annotated[
        bool,
        typer.Option(help="Print the entry agent's answer as its model writes it.", metavar=""),
    ] = True,
    stream_all: Annotated[
        bool,
        typer.Option(
            "--stream-all", help="Print every agent's model text as it comes.", metavar=""
        ),
    ] = False,
    given: Annotated[
        Path | None,
        typer.Option(
            "--input",
            help="A JSON file: structured input for the entry agent (checked against its "
            "input_schema).",
            metavar="FILE.json",
        ),
    ] = None,
) -> None:
    """Run a task and print the answer and the delegation tree.

    On a `baton serve` running on this machine with the same config and run store, if there is
    one (its agents are warm); else here: on Ray (a local instance unless RAY_ADDRESS is set),
    recorded in the run store. With --server: on that service.
    """
    settings = Settings()
    display = Display(
        "quiet" if as_json else "verbose" if verbose else "progress",
        "none" if as_json or not (stream or stream_all) else "all" if stream_all else "entry",
    )
    body = {
        "task": task,
        "agent": agent,
        "token_budget": budget,
        "deadline_s": deadline,
        "stream": display.streams,
        "input": _read_input(given) if given is not None else None,
    }
    try:
        request = RunRequest.model_validate(body)
    except ValidationError as exc:
        err.print(
            f"invalid run: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}", style="red"
        )
        raise typer.Exit(2) from None
    server = server or settings.server
    system = None if server else load_system(config, settings)
    if system is not None and not local:
        server = find_server(system, settings.store_url, settings.api_key is not None)
        if server and not as_json:
            err.print(f"using the baton serve running at {server} (--local: run here)")
    if server:
        body = request.model_dump(exclude_none=True)
        view = asyncio.run(
            _run_there(server, settings.api_key, lambda c: c.submit(body, thread), display)
        )
    else:
        assert system is not None
        if agent and agent != AUTO and agent not in system.topology.graph:
            err.print(
                f"unknown agent {agent!r}; agents: {', '.join(system.topology.graph)}", style="red"
            )
            raise typer.Exit(2)
        submission = request.submission()

        async def submit(service: RunService) -> StoredRun:
            if thread is None:
                return (await service.submit(submission))[0]
            return (await service.threads.continue_or_start(thread, submission))[0]

        view = asyncio.run(_run_here(settings, system, submit, display))
    if view.thread_id is not None and not as_json:
        err.print(f"thread {view.thread_id} (continue it: baton run --thread {view.thread_id} …)")
    _print_and_exit(view, as_json)


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="An interrupted or failed run's id.")],
    config: ConfigOption = None,
    server: Annotated[
        str | None,
        typer.Option(help="Resume it on the Baton service at this URL (default: $BATON_SERVER)."),
    ] = None,
    as_json: JsonOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Resume an interrupted or failed run from its step log, and follow it to its end.

    Finished model and tool calls are taken from the record, not made again.
    """
    settings = Settings()
    display = QUIET if as_json else Display("verbose" if verbose else "progress")
    server = server or settings.server
    if server:
        view = asyncio.run(
            _run_there(server, settings.api_key, lambda c: c.resume(run_id), display)
        )
    else:
        system = load_system(config, settings)

        async def reopen(service: RunService) -> StoredRun:
            try:
                return await service.durable.resume(run_id)
            except ServiceError as exc:
                err.print(str(exc), style="red")
                raise typer.Exit(2) from None

        view = asyncio.run(_run_here(settings, system, reopen, display))
    _print_and_exit(view, as_json)


@app.command()
def replay(
    run_id: Annotated[str, typer.Argument(help="A finished run's id.")],
    config: ConfigOption = None,
    server: Annotated[
        str | None,
        typer.Option(help="Replay it on the Baton service at this URL (default: $BATON_SERVER)."),
    ] = None,
    as_json: JsonOption = False,
    fork: Annotated[
        bool,
        typer.Option(
            "--fork",
            help="Go on live from the first step whose request differs from the record (the "
            "config changed: a new instruction or model), instead of failing there.",
            metavar="",
        ),
    ] = False,
    from_span: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="With --fork: go on live from this step, a span id of the run (a model call, "
            "a tool call or an agent: the span ids of GET /v1/runs/ID/trace).",
        ),
    ] = None,
    local: LocalOption = False,
) -> None:
    """Execute a finished run again from its step log, and compare it with the original.

    No model call and no tool call is made: the new run (linked to the original) takes every
    step from the record. Prints whether its sequence diagram (all details, without timings)
    is the original's, byte for byte, or where it first differs. Exit code 0 when it is the
    same (a fork: when it succeeded) and the replay succeeded.
    """
    settings = Settings()
    if from_span and not fork:
        err.print("--from needs --fork", style="red")
        raise typer.Exit(2)
    server = server or settings.server
    system = None if server else load_system(config, settings)
    if system is not None and not local:  # a running `baton serve` of this team and store
        server = find_server(system, settings.store_url, settings.api_key is not None)
        if server and not as_json:
            err.print(f"using the baton serve running at {server} (--local: replay here)")
    if server:
        view = asyncio.run(
            _run_there(server, settings.api_key, lambda c: c.replay(run_id, fork, from_span), QUIET)
        )
        original = view.replay_of or run_id  # (the run may have been named by a prefix)
        texts = asyncio.run(_diagrams_there(server, settings.api_key, [original, view.id]))
    else:
        assert system is not None

        async def start(service: RunService) -> StoredRun:
            try:
                return await service.durable.replay(run_id, fork=fork, from_span=from_span)
            except ServiceError as exc:
                err.print(str(exc), style="red")
                raise typer.Exit(2) from None

        view = asyncio.run(_run_here(settings, system, start, QUIET))
        original = view.replay_of or run_id
        texts = asyncio.run(_stored_diagrams(settings, [original, view.id]))
    if as_json:
        echo(view.model_dump_json(indent=2))
    else:
        print_run_view(console, view)
    same = texts[0] == texts[1]
    if same:
        console.print(f"[green]✓[/] reproduced: the same diagram as run {run_id} (full detail)")
    else:
        lines = [a.splitlines() for a in texts]
        at = next((i for i, (a, b) in enumerate(zip(*lines, strict=False)) if a != b), 0)
        console.print(f"[red]✗[/] differs from run {run_id} at diagram line {at + 1}:")
        console.print(f"  original: {lines[0][at] if at < len(lines[0]) else '(end)'}")
        console.print(f"  replay:   {lines[1][at] if at < len(lines[1]) else '(end)'}")
    raise typer.Exit(0 if (same or fork) and view.status == "succeeded" else 1)


async def _stored_diagrams(settings: Settings, run_ids: list[str]) -> list[str]:
    from tracing.sequence import sequence_diagram

    store = await open_store(settings.store_url)
    try:
        return [
            sequence_diagram(await store.spans(i), detail="full", comparable=True).text
            for i in run_ids
        ]
    finally:
        await store.close()


async def _diagrams_there(server: str, api_key: str | None, run_ids: list[str]) -> list[str]:
    async with BatonClient(server, api_key) as client:
        return [await client.diagram(i, detail="full", comparable="true") for i in run_ids]


def _say_where_the_trace_went(server: str | None, destination: str | None) -> None:
    """One line on stderr: where the run's trace was exported over OTLP, or that it was not.

    A run made on a service is exported (or not) by that service, whatever this process's
    `OTEL_*` variables say.
    """
    if destination:
        by = f" by the service at {server}" if server else ""
        err.print(f"trace: exported{by} to {destination}", style="dim")
    elif server:
        here = " (this process's OTEL_* variables apply to runs made here: --local)"
        asked = otlp_export_asked()
        err.print(
            f"trace: not exported: the service at {server} exports no traces"
            f"{here if asked else ''}",
            style="dim",
        )


def _print_and_exit(view: RunView, as_json: bool) -> None:
    if as_json:
        echo(view.model_dump_json(indent=2))
    elif console.is_terminal:
        print_run_view(console, view)
    else:  # piped: the answer alone on stdout, how the run went on stderr
        print_run_view(err, view, answer=False)
        if view.status == "succeeded":
            echo(view.output or "")
    raise typer.Exit(0 if view.status == "succeeded" else 1)
