"""An A2A agent made with the a2a-sdk's own server, for tests that call agents Baton did not write.

    python -m tests.a2a_agent --port PORT --mode MODE

MODE says how it answers a message: `message` (its answer is the final status message, as
`TaskUpdater.complete(message)` sends it: no artifact), `artifact` (an `answer` artifact, then
completed), `artifacts` (two: a summary and details), `asks` (the task asks which account, and
answers with the reply to its question), `fail` (the task fails, saying why), `slow` (works for
30 s, unless cancelled).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn
from a2a.helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from starlette.applications import Starlette

RPC_PATH = "/a2a"
_ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def serving(mode: str) -> Iterator[str]:
    """This agent in a process of its own on 127.0.0.1, answering in `mode`: its base URL."""
    from tests.ports import free_port

    port = free_port()
    args = [sys.executable, "-m", "tests.a2a_agent", "--port", str(port), "--mode", mode]
    process = subprocess.Popen(args, cwd=_ROOT, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        with httpx.Client(timeout=1) as probe:
            while True:
                try:
                    probe.get(f"{url}/.well-known/agent-card.json").raise_for_status()
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise RuntimeError(f"the a2a-sdk agent did not start ({mode})") from None
                    time.sleep(0.1)
        yield url
    finally:
        process.kill()
        process.wait()


class _Agent(AgentExecutor):
    def __init__(self, mode: str) -> None:
        self._mode = mode

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        if context.current_task is None:  # the SDK wants the task first, then its updates
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED)
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        asked = context.get_user_input()
        if self._mode == "slow":
            await asyncio.sleep(30)
        if self._mode == "fail":
            await updater.failed(updater.new_agent_message([Part(text="out of stock")]))
        elif self._mode == "artifact":
            await updater.add_artifact([Part(text=f"answer to: {asked}")], name="answer")
            await updater.complete()
        elif self._mode == "artifacts":
            await updater.add_artifact([Part(text=f"summary of: {asked}")], name="summary")
            await updater.add_artifact([Part(text=f"details of: {asked}")], name="details")
            await updater.complete()
        elif self._mode == "asks" and context.current_task is None:
            question = updater.new_agent_message([Part(text="which account?")])
            await updater.requires_input(question)
        elif self._mode == "asks":  # the answer to its question, on the same task
            await updater.add_artifact([Part(text=f"paid from: {asked}")], name="answer")
            await updater.complete()
        else:
            await updater.complete(updater.new_agent_message([Part(text=f"answer to: {asked}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def app(port: int, mode: str) -> Starlette:
    card = AgentCard(
        name="sdk-agent",
        description="An agent of the a2a-sdk's own server.",
        supported_interfaces=[
            AgentInterface(
                url=f"http://127.0.0.1:{port}{RPC_PATH}",
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="answer", name="answer", description="Answers.", tags=["answer"])],
    )
    handler = DefaultRequestHandler(_Agent(mode), InMemoryTaskStore(), card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, RPC_PATH)]
    return Starlette(routes=routes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", default="message")
    args = parser.parse_args()
    uvicorn.run(app(args.port, args.mode), host="127.0.0.1", port=args.port, log_level="warning")
