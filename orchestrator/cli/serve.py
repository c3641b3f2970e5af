"""`baton serve` (the HTTP API) and `baton mcp` (an MCP server over stdio)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Annotated

import typer

from agents.core.gc_policy import settle_after_start
from orchestrator.access import AccessFileError, AccessFileWatch, SpendPolicy
from orchestrator.cli.common import (
    ConfigOption,
    app,
    err,
    load_system,
    open_export,
    open_metric_export,
    open_store,
)
from orchestrator.cli.discovery import announce
from orchestrator.cli.run import local_service
from orchestrator.settings import Settings, is_loopback
from orchestrator.system.config import AgentSystem, default_config_path
from tracing import configure_tracing

if TYPE_CHECKING:
    from orchestrator.service import RunService

__all__ = ["mcp", "serve"]


async def _serve_mcp_stdio(settings: Settings, system: AgentSystem) -> None:
    from orchestrator.mcp.server import build_mcp_server  # Ray, litellm, mcp: slow imports

    started: asyncio.Future[RunService] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def service() -> RunService:
        return await asyncio.shield(started)

    from orchestrator.service import ServiceLimits

    # When the client closes stdin nobody waits for an answer: runs in flight are interrupted
    # and recorded at once (MCP hosts send SIGTERM 2 s after closing stdin, SIGKILL 2 s later).
    limits = ServiceLimits(shutdown_grace_s=0.0)

    async def keep_service() -> None:
        try:
            async with local_service(settings, system, "mcp", limits) as running:
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
    # SIGTERM ends the session as a closed stdin does (the runs are recorded, then it exits).
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, serving.cancel)
    await asyncio.sleep(0)
    keeper = asyncio.create_task(keep_service())
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    finally:
        stop.set()
        with contextlib.suppress(BaseException):
            await keeper


@app.command()
def mcp(config: ConfigOption = None) -> None:
    """Serve the team as an MCP server over stdin/stdout, for MCP clients (IDEs, assistants).

    Tools to submit a task, get a run, get its diagram, list the agents. Runs are recorded in the
    run store, as with `baton run`.
    """
    settings = Settings()
    system = load_system(config, settings)
    configure_tracing("orchestrator")
    asyncio.run(_serve_mcp_stdio(settings, system))


async def _store_answers(url: str, wait_s: float) -> None:
    """Exit 2 saying why, in one line, unless the run store answers within `wait_s`."""
    await (await open_store(url, wait_s)).close()


def _log_to_stderr(level: str) -> None:
    """Baton's own log lines on stderr from `level` up, as uvicorn writes its own.

    (Else they would reach only the root logger, which libraries leave at WARNING.)
    """
    from uvicorn.logging import DefaultFormatter

    handler = logging.StreamHandler()
    handler.setFormatter(DefaultFormatter("%(levelprefix)s %(message)s"))
    for name in ("orchestrator", "agents", "tracing"):
        logger = logging.getLogger(name)
        logger.setLevel(level.upper())
        logger.addHandler(handler)
        logger.propagate = False


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
    _log_to_stderr(settings.log_level)
    host = host or settings.host
    port = settings.port if port is None else port
    try:
        keys = settings.accepted_keys()
    except OSError as exc:
        err.print(f"cannot read BATON_API_KEYS_FILE {exc.filename}: {exc.strerror}", style="red")
        raise typer.Exit(2) from None
    except UnicodeDecodeError:
        err.print(f"BATON_API_KEYS_FILE {settings.api_keys_file} is not UTF-8 text", style="red")
        raise typer.Exit(2) from None
    access = None
    if settings.access_file is not None:
        try:  # its mistakes now, not at the first request
            access = AccessFileWatch(settings.access_file)
        except AccessFileError as exc:
            err.print(f"BATON_ACCESS_FILE {exc}", style="red")
            raise typer.Exit(2) from None
    if not is_loopback(host) and not keys and access is None:
        err.print(
            f"refusing to listen on {host} without API keys: set BATON_ACCESS_FILE (`baton keys "
            "new`), BATON_API_KEYS (comma-separated) or BATON_API_KEYS_FILE, or listen on "
            "127.0.0.1",
            style="red",
        )
        raise typer.Exit(2)
    system = load_system(config, settings)
    # The store first: one that is not up yet (a pod that starts before its database) is
    # waited for; one that does not come is said in one line, before anything else starts.
    wait_s = settings.store_start_wait_s
    asyncio.run(_store_answers(settings.store_url, wait_s))

    import uvicorn  # slow imports (FastAPI, Ray, litellm), after the checks

    from orchestrator.api import ApiOptions, create_app
    from orchestrator.api.server import DrainingServer, bounded_http
    from orchestrator.service import ServiceLimits
    from orchestrator.service.metrics import ServiceMetrics
    from orchestrator.serving import open_service_from_settings

    configure_tracing("orchestrator", keys)  # the keys are secrets: never in a log or span
    export = open_export()
    limits = ServiceLimits(
        max_concurrent_runs=settings.max_concurrent_runs,
        max_queued_runs=settings.max_queued_runs,
        lease_s=settings.lease_s,
        heartbeat_s=settings.sse_heartbeat_s,
        shutdown_grace_s=settings.shutdown_grace_s,
        retention_days=settings.retention_days,
        retention_max_runs=settings.retention_max_runs,
        memory_retention_days=settings.memory_retention_days,
        retention_sweep_s=settings.retention_sweep_s,
        thread_max_turns=settings.thread_max_turns,
        spending=SpendPolicy(
            tenant_daily_usd=settings.tenant_daily_usd,
            tenant_daily_tokens=settings.tenant_daily_tokens,
            key_daily_usd=settings.key_daily_usd,
            key_daily_tokens=settings.key_daily_tokens,
            warn_at=settings.spend_warn_at,
            access=access,
        ),
    )

    owner = settings.instance_id or f"{socket.gethostname()}:{port}"
    metric_export = open_metric_export()

    def service() -> AbstractAsyncContextManager[RunService]:
        metrics = ServiceMetrics(owner, metric_export)
        if access is not None:
            watched = access
            metrics.watch_access(lambda: watched.refresh() is not None and bool(watched.problem))
        return open_service_from_settings(
            settings,
            system,
            owner=owner,
            export=export,
            limits=limits,
            detached=True,
            metrics=metrics,
        )

    api = create_app(
        system,
        service,
        ApiOptions(
            api_keys=keys,
            access=access,
            oidc=settings.oidc(),
            rate_limit_per_s=settings.rate_limit_per_s,
            rate_limit_burst=settings.rate_limit_burst,
            max_body_bytes=settings.max_body_bytes,
            mermaid_dist=settings.mermaid_dist,
            mcp_origins=settings.allowed_origins,
            public_url=settings.public_url or f"http://{host}:{port}",
            a2a_blocking_wait_s=settings.a2a_blocking_wait_s,
            a2a_push_allow_private=settings.a2a_push_allow_private,
            config_path=config or settings.config or default_config_path(),
        ),
    )
    # On SIGTERM or SIGINT: uvicorn stops listening, and the service stops admitting runs and
    # drains (a grace, then the rest interrupted and recorded) while the open event streams
    # still deliver each run's end; then uvicorn closes what is left and the service stops.
    wrap_up = limits.shutdown_grace_s + limits.wrap_up_s + 5
    server_config = uvicorn.Config(
        api,
        host=host,
        port=port,
        log_level="info",
        access_log=settings.access_log,
        timeout_graceful_shutdown=int(wrap_up),
        http=bounded_http(settings.request_head_timeout_s),
    )
    # `baton run` on this machine, with this config and store, uses this server's agents.
    local = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    url = f"http://[{local}]:{port}" if ":" in local else f"http://{local}:{port}"
    noted = announce(url, system, settings.store_url, bool(keys)) if port else nullcontext()
    settle_after_start()  # what start-up made (modules, the app) lives as long as the process
    with noted:
        DrainingServer(server_config).run()
