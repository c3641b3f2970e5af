"""A client of Baton's HTTP API: submit a run, follow its events, fetch it (--server)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from agents.core.events import EVENTS, Event, RunFinished
from agents.core.waits import Resolution

__all__ = ["ApiError", "BatonClient", "ServerEvent", "parse_sse"]

RECONNECTS = 5


class ApiError(Exception):
    """The service answered with an error body."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status, self.code, self.message = status, code, message
        super().__init__(f"{status} {code}: {message}")


@dataclass
class ServerEvent:
    """One Server-Sent Event as received."""

    id: str | None = None
    event: str = "message"
    data: str = ""
    _lines: list[str] = field(default_factory=list, repr=False)

    def json(self) -> Any:
        """The event's data, parsed as JSON."""
        return json.loads(self.data)


async def parse_sse(lines: AsyncIterator[str]) -> AsyncIterator[ServerEvent]:
    """Server-Sent Events from a stream of lines (the `text/event-stream` format)."""
    current = ServerEvent()
    async for line in lines:
        if not line:
            if current._lines:
                current.data = "\n".join(current._lines)
                yield current
            current = ServerEvent()
            continue
        if line.startswith(":"):
            continue  # a comment: keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            current._lines.append(value)
        elif name == "event":
            current.event = value
        elif name == "id":
            current.id = value


class BatonClient:
    """Talks to one Baton service.

    Args:
        base_url: for example `http://127.0.0.1:8000`.
        api_key: sent as a bearer token when set.
    """

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 30) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s
        )

    async def __aenter__(self) -> BatonClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._http.aclose()

    async def _json(self, response: httpx.Response) -> Any:
        if response.is_success:
            return response.json()
        try:
            error = response.json()["error"]
            raise ApiError(response.status_code, error["code"], error["message"])
        except (ValueError, KeyError, TypeError):
            raise ApiError(response.status_code, "http_error", response.text[:300]) from None

    async def submit(self, body: dict[str, Any], thread: str | None = None) -> dict[str, Any]:
        """Submit a run; retried on connection errors with the same Idempotency-Key.

        A retry thus never starts a second run. `thread`: as a turn of that thread (`new`: of a
        new one).
        """
        path = "/v1/runs"
        if thread is not None:
            if thread == "new":
                thread = (await self._json(await self._http.post("/v1/threads", json={})))["id"]
            path = f"/v1/threads/{thread}/runs"
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        for attempt in range(RECONNECTS):
            try:
                answer = await self._http.post(path, json=body, headers=headers)
                return await self._json(answer)  # type: ignore[no-any-return]
            except httpx.TransportError:
                if attempt == RECONNECTS - 1:
                    raise
                await asyncio.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")

    async def service(self) -> dict[str, Any]:
        """What the service is (`GET /v1/service`): its team, version, trace export."""
        return await self._json(await self._http.get("/v1/service"))  # type: ignore[no-any-return]

    async def agents(self) -> list[str]:
        """The names of the service's agents (`GET /v1/agents`)."""
        listed = await self._json(await self._http.get("/v1/agents"))
        return [agent["name"] for agent in listed["agents"]]

    async def experiment(self, experiment_id: str) -> dict[str, Any]:
        """An experiment kept by the service (`GET /v1/experiments/{id}`)."""
        answer = await self._http.get(f"/v1/experiments/{experiment_id}")
        return await self._json(answer)  # type: ignore[no-any-return]

    async def add_experiment(self, body: dict[str, Any]) -> dict[str, Any]:
        """Keep an experiment of runs made there (`POST /v1/experiments`)."""
        return await self._json(await self._http.post("/v1/experiments", json=body))  # type: ignore[no-any-return]

    async def add_evaluation(self, run_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Add a case's verdicts to a run's trace (`POST /v1/runs/{id}/evaluations`)."""
        answer = await self._http.post(f"/v1/runs/{run_id}/evaluations", json=body)
        return await self._json(answer)  # type: ignore[no-any-return]

    async def trace(self, run_id: str) -> dict[str, Any]:
        """A run's spans as trees (`GET /v1/runs/{id}/trace`)."""
        return await self._json(await self._http.get(f"/v1/runs/{run_id}/trace"))  # type: ignore[no-any-return]

    async def get(self, run_id: str) -> dict[str, Any]:
        """A run as the service answers it."""
        return await self._json(await self._http.get(f"/v1/runs/{run_id}"))  # type: ignore[no-any-return]

    async def replay(
        self, run_id: str, fork: bool = False, from_span: str | None = None
    ) -> dict[str, Any]:
        """Execute a finished run again from its step log (a fork: live where it differs)."""
        if not fork:
            return await self._json(await self._http.post(f"/v1/runs/{run_id}/replay"))  # type: ignore[no-any-return]
        body = {"from_span": from_span} if from_span else {}
        answer = await self._http.post(f"/v1/runs/{run_id}/fork", json=body)
        return await self._json(answer)  # type: ignore[no-any-return]

    async def diagram(self, run_id: str, **params: str) -> str:
        """A run's sequence diagram as Mermaid text."""
        answer = await self._http.get(f"/v1/runs/{run_id}/diagram", params=params)
        if answer.status_code >= 400:
            await self._json(answer)  # raises ApiError
        return answer.text

    async def resume(self, run_id: str) -> dict[str, Any]:
        """Resume an interrupted or failed run from its step log."""
        return await self._json(await self._http.post(f"/v1/runs/{run_id}/resume"))  # type: ignore[no-any-return]

    async def resolve(
        self, run_id: str, wait_id: str | None, resolution: Resolution
    ) -> dict[str, Any]:
        """End a wait of a run: approve or deny a call, or answer a question.

        `wait_id` names it; a question may go unnamed when the run asks only one.
        """
        if resolution.kind == "approval":
            body: dict[str, Any] = {"approve": resolution.approved, "message": resolution.message}
            reply = await self._http.post(f"/v1/runs/{run_id}/approvals/{wait_id}", json=body)
        else:
            body = {"answer": resolution.answer, "question_id": wait_id}
            reply = await self._http.post(f"/v1/runs/{run_id}/input", json=body)
        return await self._json(reply)  # type: ignore[no-any-return]

    async def cancel(self, run_id: str) -> dict[str, Any]:
        """Cancel a run."""
        return await self._json(await self._http.post(f"/v1/runs/{run_id}/cancel"))  # type: ignore[no-any-return]

    async def events(self, run_id: str) -> AsyncIterator[Event]:
        """The run's events until `run_finished`.

        Reconnects (with `Last-Event-ID`) if the connection drops.
        """
        last: str | None = None
        failures = 0
        while True:
            headers = {"Last-Event-ID": last} if last else {}
            try:
                async with self._http.stream(
                    "GET", f"/v1/runs/{run_id}/events", headers=headers, timeout=None
                ) as response:
                    if not response.is_success:
                        await response.aread()
                        await self._json(response)
                    async for item in parse_sse(response.aiter_lines()):
                        failures = 0
                        last = item.id or last
                        event = EVENTS.validate_python(item.json())
                        yield event
                        if isinstance(event, RunFinished):
                            return
                return  # the server ended the stream
            except (httpx.TransportError, httpx.StreamError):
                failures += 1
                if failures > RECONNECTS:
                    raise
                await asyncio.sleep(0.2 * 2**failures)
