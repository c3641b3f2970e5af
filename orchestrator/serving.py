"""Opening a run service: the store, Ray, the engine and the service, and closing them.

They open in that order and close in reverse. One place for every door that runs a service
(`baton serve`, `baton run`, `baton mcp`, the tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from agents.ray.pool import PoolOptions
from orchestrator.cluster import Connection, RaySession, connect_ray, is_local, keep_sigterm_handler
from orchestrator.engine import Engine
from orchestrator.service import RunService, ServiceLimits
from orchestrator.settings import Settings
from orchestrator.store import DEFAULT_POOL_SIZE, DEFAULT_STORE_WAIT_S, RunStore, absolute_store_url
from orchestrator.system.config import AgentSystem
from tracing import OtlpExport, configure_tracing

if TYPE_CHECKING:  # (loaded by `baton serve` only: OpenTelemetry's metrics, prometheus_client)
    from orchestrator.service.metrics import ServiceMetrics

__all__ = ["agent_env", "open_service", "open_service_from_settings", "pool_options"]


def agent_env(system: AgentSystem, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the system's `env:` forwards to its agents, as set here (secrets)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in system.config.env if name in environ}


def pool_options(settings: Settings, system: AgentSystem, *, detached: bool) -> PoolOptions:
    """How the system's actors run, as the settings (environment) say: built once, here."""
    return PoolOptions(
        namespace=settings.namespace,
        env=agent_env(system),
        detached=detached,
        forbid_remote_models=settings.forbid_remote_models,
        store_url=absolute_store_url(settings.store_url),
        code_path=(system.folder,) if system.folder else (),
        ledger_feed_events=settings.ledger_feed_events,
        ledger_shards=settings.ledger_shards,
    )


def open_service_from_settings(
    settings: Settings,
    system: AgentSystem,
    *,
    owner: str,
    export: OtlpExport | None = None,
    limits: ServiceLimits | None = None,
    detached: bool = False,
    metrics: ServiceMetrics | None = None,
) -> contextlib.AbstractAsyncContextManager[RunService]:
    """`open_service` as the settings (environment) say: store, Ray address, actors' options."""
    return open_service(
        system,
        pool_options(settings, system, detached=detached),
        store_url=settings.store_url,
        store_pool_size=settings.store_pool_size,
        store_wait_s=settings.store_wait_s,
        ray_address=settings.ray_address,
        owner=owner,
        export=export,
        limits=limits,
        metrics=metrics,
    )


@asynccontextmanager
async def open_service(
    system: AgentSystem,
    options: PoolOptions,
    *,
    store_url: str,
    store_pool_size: int = DEFAULT_POOL_SIZE,
    store_wait_s: float = DEFAULT_STORE_WAIT_S,
    ray_address: str | None,
    owner: str,
    export: OtlpExport | None = None,
    limits: ServiceLimits | None = None,
    metrics: ServiceMetrics | None = None,
) -> AsyncIterator[RunService]:
    """Open the store, join Ray, and run a `RunService` until the block ends.

    Args:
        system: the validated agent system.
        options: how its actors run (`PoolOptions`: namespace, forwarded variables, lifetime).
        store_url: the run store's SQLAlchemy URL.
        store_pool_size: the store's connections kept open for reuse.
        store_wait_s: how long a store call waits on the database before it fails.
        ray_address: the cluster to join (None: a local Ray instance).
        owner: names this instance in the store (stable across its restarts).
        export: where finished runs' spans go besides the store (an OTLP backend).
        limits: admission bounds, lease and heartbeat periods.
        metrics: the service's instruments (`/metrics`, OTLP), closed with it.
    """
    store = await RunStore.open(store_url, pool_size=store_pool_size, wait_s=store_wait_s)
    ray_connection = Connection()
    try:
        with keep_sigterm_handler():
            # A service's own local Ray (its hosts are detached: `baton serve`) in a session of
            # its own: a signal to the service's process group reaches the service alone.
            # (Started from this thread, the main one, whose end it shares.)
            session = RaySession() if options.detached and is_local(ray_address) else None
            ray_connection = await asyncio.to_thread(
                connect_ray, ray_address, options.namespace, session
            )
        if ray_connection.token is not None:
            configure_tracing("orchestrator", [ray_connection.token])  # a secret like any other
        engine = Engine(system, options, export=export)
        if metrics is not None and export is not None:
            metrics.watch_export(lambda: (export.sent, export.dropped))

        def make_engine(version: AgentSystem) -> Engine:  # a new version of the team (`roll`)
            return Engine(version, replace(options, env=agent_env(version)), export=export)

        service = RunService(
            engine,
            store,
            owner=owner,
            limits=limits,
            metrics=metrics,
            make_engine=make_engine,
        )
        await service.start()
        try:
            yield service
        finally:
            await service.stop()
    finally:
        await store.close()
        if export is not None:
            await asyncio.to_thread(export.shutdown)  # send what is queued
        if metrics is not None:
            await asyncio.to_thread(metrics.close)
        # No process of ours left behind. On this thread, which made every Ray call: Ray's core
        # worker ends the process (status 1) if another thread touches it while it shuts down.
        ray_connection.close()
