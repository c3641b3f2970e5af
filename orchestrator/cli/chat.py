"""`baton chat`: a conversation with a team in the terminal, one thread, a run per turn.

Each message is the next turn of the chat's thread (its entry agent sees the earlier turns); the
answer streams as it is written, each delegation a line as it happens, and questions and
approvals are asked at the prompt. Ctrl-C cancels the running turn, not the chat. Here (an
in-process run service, as `baton run`) or on a running service (`--server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Protocol

import typer

from agents.core.events import Event
from orchestrator.cli.client import ApiError, BatonClient
from orchestrator.cli.common import (
    AgentOption,
    ConfigOption,
    ServerOption,
    app,
    err,
    load_system,
    open_store,
    progress,
)
from orchestrator.cli.follow import Display, Person, WordRefused, follow, person_here, person_there
from orchestrator.errors import ServiceError
from orchestrator.schemas import RunRequest
from orchestrator.settings import Settings
from orchestrator.system.routing import AUTO

if TYPE_CHECKING:
    from orchestrator.service import RunService
    from orchestrator.system.config import AgentSystem

__all__ = ["chat"]

# How long a cancelled turn's display has to let go of its event stream.
_LET_GO_S = 2.0

HELP = (
    "/new a new thread · /thread its id · /agent NAME the entry agent · /diagram the last "
    "turn's · /exit (or Ctrl-D)"
)


class _Team(Protocol):
    """Where the chat's turns run: here, or on a service."""

    async def turn(self, thread: str | None, text: str, agent: str | None) -> tuple[str, str]:
        """Start a turn (of a new thread when `thread` is None); its run's and thread's ids."""

    def events(self, run_id: str) -> AsyncIterator[Event | None]:
        """The run's events to its end."""

    def person(self, run_id: str) -> Person:
        """Where the person's answers and decisions on the run go."""

    async def cancel(self, run_id: str) -> None:
        """Cancel the run."""

    async def status(self, run_id: str) -> tuple[str, str | None]:
        """The run's status and error (once it has ended)."""

    async def diagram(self, run_id: str) -> str:
        """The run's sequence diagram (Mermaid)."""


@dataclass
class _HereTeam:
    """Turns run by an in-process run service (Ray, the store, as `baton run`)."""

    service: RunService

    async def turn(self, thread: str | None, text: str, agent: str | None) -> tuple[str, str]:
        submission = RunRequest(task=text, agent=agent, stream=True).submission()
        run, _ = await self.service.threads.continue_or_start(thread or "new", submission)
        assert run.thread_id is not None  # a thread's run: its context is the thread
        return run.id, run.thread_id

    async def events(self, run_id: str) -> AsyncIterator[Event | None]:
        async for item in self.service.events.follow(await self.service.get(run_id)):
            yield item[1] if item is not None else None

    def person(self, run_id: str) -> Person:
        return person_here(self.service, run_id)

    async def cancel(self, run_id: str) -> None:
        await self.service.cancel(run_id)

    async def status(self, run_id: str) -> tuple[str, str | None]:
        run = await self.service.get(run_id)
        return run.status.value, run.error

    async def diagram(self, run_id: str) -> str:
        return (await self.service.views.diagram(await self.service.get(run_id))).text


@dataclass
class _ServerTeam:
    """Turns run by a Baton service, over its HTTP API."""

    client: BatonClient

    async def turn(self, thread: str | None, text: str, agent: str | None) -> tuple[str, str]:
        body = RunRequest(task=text, agent=agent, stream=True).model_dump(exclude_none=True)
        run = await self.client.submit(body, thread or "new")
        return str(run["id"]), str(run["thread_id"])

    async def events(self, run_id: str) -> AsyncIterator[Event | None]:
        async for event in self.client.events(run_id):
            yield event

    def person(self, run_id: str) -> Person:
        return person_there(self.client, run_id)

    async def cancel(self, run_id: str) -> None:
        await self.client.cancel(run_id)

    async def status(self, run_id: str) -> tuple[str, str | None]:
        run = await self.client.get(run_id)
        return str(run["status"]), run.get("error")

    async def diagram(self, run_id: str) -> str:
        return await self.client.diagram(run_id)


@dataclass
class _Chat:
    """One chat: its thread, its last turn, and the turn under way."""

    team: _Team
    agent: str | None
    thread: str | None = None
    last: str | None = None  # the last turn's run
    running: str | None = None  # the run of the turn under way

    async def turn(self, text: str) -> None:
        """One turn: submitted, followed to its end, or cancelled by Ctrl-C (SIGINT)."""
        self.running, self.thread = await self.team.turn(self.thread, text, self.agent)
        self.last = run_id = self.running
        # Ctrl-C sets an event (the loop's own handler) rather than cancelling whatever the
        # turn awaits: a cancellation landing in the HTTP client's shielded clean-up is lost.
        interrupted = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, interrupted.set)
        try:
            with progress().status("thinking…") as status:
                following = asyncio.ensure_future(
                    follow(
                        self.team.events(run_id),
                        status,
                        Display("progress", "entry", answer=True),
                        self.team.person(run_id),
                    )
                )
                stop = asyncio.ensure_future(interrupted.wait())
                await asyncio.wait({following, stop}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if not following.done():
                    following.cancel()
                    await asyncio.wait({following}, timeout=_LET_GO_S)
                    await self.cancel()
                    return
                try:
                    following.result()  # its error, if it failed
                except WordRefused as refused:  # the turn waits for someone who may answer
                    err.print(
                        f"your word was refused: {refused}. The turn waits for someone who may "
                        "give it; /new starts another thread meanwhile",
                        style="yellow",
                        markup=False,
                    )
                    self.running = None
                    return
        finally:
            loop.remove_signal_handler(signal.SIGINT)
        ended, error = await self.team.status(run_id)
        self.running = None
        if ended != "succeeded":  # a succeeded turn's answer says it all
            err.print(f"turn ended {ended}: {error or 'no detail'}", style="yellow")

    async def cancel(self) -> None:
        """Cancel the turn under way (its run), if there is one."""
        if self.running is not None:
            run_id, self.running = self.running, None
            with contextlib.suppress(ServiceError, ApiError):
                await self.team.cancel(run_id)
            err.print("turn cancelled", style="yellow")

    def command(self, line: str, runner: asyncio.Runner) -> bool:
        """Do a /command; False when the chat ends."""
        word = line.split()[0].lower()
        if word in ("/exit", "/quit"):
            return False
        if word == "/new":
            self.thread = self.last = None
            err.print("a new thread: the next message starts it")
        elif word == "/thread":
            err.print(self.thread or "no thread yet: the next message starts one")
        elif word == "/agent":
            self.agent = line.split()[1] if len(line.split()) > 1 else None
            err.print(f"the next turns go to {self.agent or 'the entry agent'}")
        elif word == "/diagram":
            if self.last is None:
                err.print("no turn yet")
            else:
                print(runner.run(self.team.diagram(self.last)))
        else:
            err.print(HELP)
        return True


def _converse(chat: _Chat, runner: asyncio.Runner) -> None:
    err.print(f"chatting with the team · {HELP}")
    if chat.thread is not None:
        err.print(f"thread {chat.thread}")
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            print()
            return
        except KeyboardInterrupt:  # at the prompt: a new prompt, as a shell does
            print()
            continue
        if not line:
            continue
        if line.startswith("/"):
            if not chat.command(line, runner):
                return
            continue
        try:
            runner.run(chat.turn(line))
        except KeyboardInterrupt:  # between two awaits of the turn, before its handler
            runner.run(chat.cancel())
        except (ServiceError, ApiError) as exc:
            err.print(str(exc), style="red")


async def _open(
    stack: AsyncExitStack, settings: Settings, system: AgentSystem | None, server: str | None
) -> _Team:
    if server:
        return _ServerTeam(await stack.enter_async_context(BatonClient(server, settings.api_key)))
    from orchestrator.cli.run import local_service  # Ray: a slow import
    from orchestrator.service.run_service import ServiceLimits

    assert system is not None
    await (await open_store(settings.store_url)).close()  # a clear error before Ray starts
    limits = ServiceLimits(max_concurrent_runs=1, max_queued_runs=0)
    with progress().status("starting Ray and the agents…"):
        service = await stack.enter_async_context(local_service(settings, system, "chat", limits))
    return _HereTeam(service)


@app.command()
def chat(
    thread: Annotated[
        str | None, typer.Option(help="Go on with this thread (default: a new one).")
    ] = None,
    agent: AgentOption = None,
    config: ConfigOption = None,
    server: ServerOption = None,
) -> None:
    """Chat with the team: each message is the next turn of one thread.

    The answer is printed as it is written, each delegation as it happens; an agent's question
    is asked at the prompt. /new starts a new thread, /thread prints its id, /agent NAME sends
    the next turns to that agent, /diagram prints the last turn's sequence diagram, /exit (or
    Ctrl-D) ends; Ctrl-C cancels the turn under way.
    """
    settings = Settings()
    server = server or settings.server
    system = None if server else load_system(config, settings)
    if system is not None and agent and agent != AUTO and agent not in system.topology.graph:
        err.print(
            f"unknown agent {agent!r}; agents: {', '.join(system.topology.graph)}", style="red"
        )
        raise typer.Exit(2)
    with asyncio.Runner() as runner:
        stack = AsyncExitStack()
        try:
            team = runner.run(_open(stack, settings, system, server))
            _converse(_Chat(team, agent, thread), runner)
        except (ServiceError, ApiError) as exc:
            err.print(str(exc), style="red")
            raise typer.Exit(2) from None
        finally:
            runner.run(stack.aclose())
