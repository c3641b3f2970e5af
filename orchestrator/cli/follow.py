"""What `baton run` and `baton chat` show while a run goes, and what it asks of the person.

Its events, the streamed answer; approvals to give and questions to answer at the terminal.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import typer
from rich.status import Status

from agents.core.events import ApprovalRequested, Event, InputRequested, ModelDelta
from agents.core.waits import Resolution
from orchestrator.cli.client import ApiError, BatonClient
from orchestrator.cli.common import progress
from orchestrator.errors import ServiceError

if TYPE_CHECKING:
    from orchestrator.service import RunService

__all__ = ["Display", "Person", "follow", "person_here", "person_there"]


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
    """

    events: Literal["quiet", "progress", "verbose"] = "progress"
    text: Literal["none", "entry", "all"] = "entry"

    @property
    def streams(self) -> bool:
        """Whether the run should stream its models' text (someone will read it)."""
        return self.text != "none"


QUIET = Display("quiet", "none")


class _Text:
    """Streamed text as it comes, under a heading per invocation; other lines end it first."""

    def __init__(self, status: Status) -> None:
        self._status = status
        self._open: str | None = None  # the invocation whose text is being written

    def write(self, delta: ModelDelta) -> None:
        if self._open != delta.invocation:
            self.end()
            self._status.stop()
            progress().print(f"[bold cyan]{delta.agent} ▸[/] ", end="")
            self._open = delta.invocation
        progress().print(delta.text, end="", markup=False, highlight=False, soft_wrap=True)

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
            if display.events == "verbose" or (
                display.events == "progress" and event.level == "progress"
            ):
                progress().print(event.describe(), soft_wrap=True)
            if isinstance(event, ApprovalRequested):
                approved, why = _ask_person(event, status)
                decision = Resolution.decision(approved, why, who="terminal")
                with contextlib.suppress(ServiceError, ApiError):  # decided already: fine
                    await person.resolve(event.call_id, decision)
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
                with contextlib.suppress(ServiceError, ApiError):  # answered already: fine
                    await person.resolve(event.call_id, answer)
    finally:
        text.end()
