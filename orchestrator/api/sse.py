"""A run's events as Server-Sent Events, written straight from the feed.

FastAPI can stream a generator's items as SSE (and documents their schema, which is why the
route's OpenAPI entry is still FastAPI's: `routes/runs.py`), but it hands every event through
a producer task, two memory streams, a keep-alive timer and an extra turn of the loop: a
quarter of `baton serve`'s CPU under many followers. The feed already sends heartbeats, so
here each event is one encoded chunk, sent as it comes.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from starlette.responses import StreamingResponse

from agents.core.events import Event

__all__ = ["SseResponse"]

HEARTBEAT = b": heartbeat\n\n"


def _frame(item: tuple[int, Event] | None) -> bytes:
    """One event in the SSE wire format, or (`None`) a comment that keeps the connection alive.

    An event is named by its type, its JSON is the data, and its id is where to resume after
    (an event that is not stored, id 0, has none).
    """
    if item is None:
        return HEARTBEAT
    seq, event = item
    # The JSON is one line, and an event's type is one of a fixed set: no field needs splitting.
    head = f"event: {event.type}\ndata: {event.model_dump_json()}\n"
    return (head + f"id: {seq}\n\n" if seq else head + "\n").encode()


async def _frames(items: AsyncGenerator[tuple[int, Event] | None]) -> AsyncIterator[bytes]:
    try:
        async for item in items:
            yield _frame(item)
    finally:
        await items.aclose()  # at once when the client goes, not when the generator is collected


class SseResponse(StreamingResponse):
    """A run's feed as `text/event-stream`.

    Starlette ends it, and so the feed's follow, when the client disconnects.
    """

    media_type = "text/event-stream"

    def __init__(self, items: AsyncGenerator[tuple[int, Event] | None]) -> None:
        # Proxies must not cache it nor (nginx) buffer it.
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(_frames(items), headers=headers)
