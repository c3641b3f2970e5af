"""What `baton run` and `baton chat` show while a run goes, and what it asks of the person.

Its events, the streamed answer; approvals to give and questions to answer at the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import typer
from rich.status import Status

from agents.core.events import ApprovalRequested, Event, InputRequested, ModelDelta, RunFinished
from agents.core.waits import Resolution
from orchestrator.cli.client import ApiError, BatonClient
from orchestrator.cli.common import progress
from orchestrator.errors import ServiceError

if TYPE_CHECKING:
    from orchestrator.service import RunService

__all__ = ["Display", "Person", "WordRefused", "follow", "person_here", "person_there"]


@dataclass(frozen=True)
class Person:
    """Where the person's word on a followed run goes.

    Attributes:
        resolve: records the person's word on a wait (its id; a decision or an answer, or
            the expiry: no one will answer, the run stops waiting).
        elsewhere: someone else may answer (a server's API and web UI): without a terminal
            here, a question is left waiting for them.
    """

    resolve: Callable[[str, Resolution], Awaitable[object]]
    elsewhere: bool = False


@dataclass(frozen=True)
class Display:
    """What is printed as a run goes.

    Attributes:
        events: none (--json), agents' progress, or every event (--verbose).
        text: streamed model text shown: none, the entry agent's answer, or every agent's.
        answer: the run's answer is printed as it ends, unless it was streamed whole (a chat's
            turn: nothing prints it after).
    """

    events: Literal["quiet", "progress", "verbose"] = "progress"
    text: Literal["none", "entry", "all"] = "entry"
    answer: bool = False

    @property
    def streams(self) -> bool:
        """Whether the run should stream its models' text (someone will read it)."""
        return self.text != "none"


QUIET = Display("quiet", "none")


class _Text:
    """Streamed text as it comes, under a heading per invocation; other lines end it first.

    `entry`: what the entry agent's invocations streamed (the run's answer, as far as it came).
    """

    def __init__(self, status: Status) -> None:
        self._status = status
        self._open: str | None = None  # the invocation whose text is being written
        self.entry = ""

    def write(self, delta: ModelDelta) -> None:
        if self._open != delta.invocation:
            self.end()
            self._status.stop()
            progress().print(f"[bold cyan]{delta.agent} ▸[/] ", end="")
            self._open = delta.invocation
        if len(delta.chain) == 1:
            self.entry += delta.text
        progress().print(delta.text, end="", markup=False, highlight=False, soft_wrap=True)

    def answer(self, finished: RunFinished) -> None:
        """Print the run's answer, unless its whole text was streamed already.

        A follower that came late (or whose stream reconnected) saw part of it, or none.
        """
        if finished.output is None or finished.output.strip() == self.entry.strip():
            return
        self.end()
        self._status.stop()
        progress().print(f"[bold cyan]{finished.agent} ▸[/] ", end="")
        progress().print(finished.output, markup=False, highlight=False, soft_wrap=True)
        self._status.start()

    def end(self) -> None:
        if self._open is not None:
            progress().print()
            self._open = None
            self._status.start()


def _ask_person(event: ApprovalRequested, status: Status) -> tuple[bool, str]:
    """A call waits for approval: ask at the terminal, or deny when there is none."""
    if not sys.stdin.isatty():
        return False, "no one to approve: baton run is not attached to a terminal"
    status.stop()
    try:
        progress().print(
            f"[yellow]?[/] {event.agent} wants to call [bold]{event.tool}[/] with {event.arguments}"
        )
        approved = typer.confirm("approve this call?", default=False)
        message = "" if approved else typer.prompt("why not (told to the model)", default="")
        return approved, message
    finally:
        status.start()


def person_here(service: RunService, run_id: str) -> Person:
    """The person at this terminal, for a run of an in-process service (`baton run`, `chat`).

    With no terminal there is no one else to ask either (this process holds the run): a
    question's wait ends at once.
    """

    async def resolve(wait_id: str, resolution: Resolution) -> object:
        return await service.desk.resolve(await service.get(run_id), resolution, wait_id)

    return Person(resolve)


def person_there(client: BatonClient, run_id: str) -> Person:
    """The person at this terminal, for a run of a service reached over HTTP (`--server`)."""

    async def resolve(wait_id: str, resolution: Resolution) -> object:
        return await client.resolve(run_id, wait_id, resolution)

    return Person(resolve, elsewhere=True)


def _ask_question(event: InputRequested, status: Status) -> str | None:
    """An agent asks the person: the answer typed at the terminal (None: there is none)."""
    if not sys.stdin.isatty():
        return None
    status.stop()
    try:
        progress().print(f"[yellow]?[/] [bold]{event.agent}[/] asks: {event.question}")
        if event.choices:
            progress().print("  (" + " / ".join(event.choices) + ")", markup=False)
        answer: str = typer.prompt("your answer")
        return answer
    finally:
        status.start()


class WordRefused(Exception):
    """The person's word was refused (their key may not approve, say): the message says why."""


async def _say(person: Person, wait_id: str, resolution: Resolution) -> None:
    """Give the person's word; one that came too late (decided already) is fine.

    Raises:
        WordRefused: refused otherwise (a key without the `approve` role, say).
    """
    try:
        await person.resolve(wait_id, resolution)
    except ServiceError as exc:
        if exc.status != 409:
            raise WordRefused(exc.message) from None
    except ApiError as exc:
        if exc.status != 409:
            raise WordRefused(f"{exc.status} {exc.code}: {exc.message}") from None


async def follow(
    events: AsyncIterator[Event | None], status: Status, display: Display, person: Person
) -> None:
    """Show a run's events as they come, and ask for the approvals and answers it waits for."""
    text = _Text(status)
    try:
        async for event in events:
            if event is None:
                continue
            if isinstance(event, ModelDelta):
                if display.text == "all" or (display.text == "entry" and len(event.chain) == 1):
                    text.write(event)
                continue
            text.end()
            status.update("running…")
            asking_here = isinstance(event, InputRequested) and sys.stdin.isatty()
            if not asking_here and (  # (a question asked here is printed once, as asked)
                display.events == "verbose"
                or (display.events == "progress" and event.level == "progress")
            ):
                progress().print(event.describe(), soft_wrap=True)
            if isinstance(event, RunFinished) and display.answer:
                text.answer(event)
            if isinstance(event, ApprovalRequested):
                approved, why = _ask_person(event, status)
                decision = Resolution.decision(approved, why, who="terminal")
                await _say(person, event.call_id, decision)
            elif isinstance(event, InputRequested):
                said = _ask_question(event, status)
                if said is None and person.elsewhere:
                    progress().print(
                        "  waiting for the answer: give it on the run's page, or with "
                        "POST /v1/runs/RUN_ID/input",
                        markup=False,
                    )
                    continue
                answer = (
                    Resolution.reply(said, who="terminal")
                    if said is not None
                    else Resolution.expired("question")
                )
                await _say(person, event.call_id, answer)
    finally:
        text.end()
