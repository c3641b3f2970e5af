"""A run's events on the wire (`orchestrator/api/sse.py`), through a real uvicorn on
127.0.0.1: what a follower reads, and what happens when it hangs up."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncGenerator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from agents.core.events import Event, ModelDelta, RunStarted
from orchestrator.api.sse import SseResponse
from orchestrator.cli.client import parse_sse

pytestmark = pytest.mark.anyio


async def test_a_follower_reads_named_events_with_ids_and_its_hanging_up_ends_the_follow() -> None:
    # A run that says two things, then goes quiet for as long as it takes: the follow must
    # end because the follower left, not because the run did.
    quiet, closed = asyncio.Event(), asyncio.Event()

    async def feed() -> AsyncGenerator[tuple[int, Event] | None]:
        try:
            yield 1, RunStarted(agent="lead")
            yield 0, ModelDelta(agent="lead", invocation="i", step=1, text="he")  # not stored
            yield None  # a heartbeat
            quiet.set()
            await asyncio.Event().wait()
        finally:
            closed.set()

    async def events(_: Request) -> SseResponse:
        return SseResponse(feed())

    # Listening before uvicorn starts: the client's connection waits in the backlog.
    listening = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listening.getsockname()[1]}/events"
    app = Starlette(routes=[Route("/events", events)])
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", timeout_graceful_shutdown=1))
    serving = asyncio.ensure_future(server.serve(sockets=[listening]))
    lines: list[str] = []
    try:
        async with asyncio.timeout(30):
            async with httpx.AsyncClient() as client, client.stream("GET", url) as answer:
                assert answer.headers["content-type"].startswith("text/event-stream")
                assert answer.headers["cache-control"] == "no-cache"
                async for line in answer.aiter_lines():
                    lines.append(line)
                    if line.startswith(":"):
                        break
            await quiet.wait()
            await closed.wait()  # hung up: the feed's generator was closed
    finally:
        server.should_exit = True
        await serving

    async def each() -> AsyncGenerator[str]:
        for line in lines:
            yield line

    started, delta = [(e.event, e.id, e.data) async for e in parse_sse(each())]
    assert started[:2] == ("run_started", "1")
    assert RunStarted.model_validate_json(started[2]).agent == "lead"
    assert delta[:2] == ("model_delta", None)  # nothing to resume from
    assert ModelDelta.model_validate_json(delta[2]).text == "he"
    assert lines[-1] == ": heartbeat"
