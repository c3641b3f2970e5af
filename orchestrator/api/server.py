"""uvicorn, for Baton: a server that drains the run service as soon as it is asked to exit.

And its HTTP protocol, with bounds on what a request's head may take.
"""

from __future__ import annotations

import asyncio
from types import FrameType

import uvicorn
from typing_extensions import override
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["BoundedHttp", "DrainingServer", "bounded_http"]

# A request's head (request line and headers): its size, its number of headers, the time to
# receive it. Past them the request is refused (431, 408) and the connection closed, so a
# client cannot make the service hold a head of any size, or a connection for ever.
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100


class _HeadTooLarge(Exception):
    pass


class BoundedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds above.

    httptools keeps a header whole (a 64 MiB header is 64 MiB held), so a head's bytes are
    counted as they arrive, before the parser keeps them; the timer runs from a request's first
    byte to the end of its head. A connection that sends nothing is left alone: browsers open
    sockets ahead of their requests, and a 408 on one they are about to use fails that request
    (between requests, uvicorn's keep-alive timeout holds). `head_timeout_s`: the time a head
    may take (see `bounded_http`).
    """

    head_timeout_s = 10.0
    _in_head = True
    _head_bytes = 0
    _too_large = False
    _head_timer: asyncio.TimerHandle | None = None

    @override
    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_timer is None:
                self._time_head()
        super().data_received(data)
        if self._in_head and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self._answer(431, "the request's headers are too large")

    @override
    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= MAX_HEADERS:
            self._too_large = True
            raise _HeadTooLarge  # stops the parser: uvicorn then calls send_400_response
        super().on_header(name, value)

    @override
    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        self._stop_timer()
        super().on_headers_complete()

    @override
    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True  # what comes next is the next request's head

    @override
    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    @override
    def send_400_response(self, msg: str) -> None:
        # uvicorn answers any parser error 400; too many headers are 431.
        if self._too_large:
            self._answer(431, "the request has too many headers")
        else:
            super().send_400_response(msg)

    def _time_head(self) -> None:
        self._stop_timer()
        loop = asyncio.get_running_loop()
        self._head_timer = loop.call_later(self.head_timeout_s, self._too_slow)

    def _stop_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        if self._in_head:
            self._answer(408, "the request's head did not arrive in time")

    def _answer(self, status: int, message: str) -> None:
        reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
        body = message.encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (status, reason, len(body), body)
        )
        self.transport.close()


class DrainingServer(uvicorn.Server):
    """Starts `RunService.drain` on SIGTERM or SIGINT, before uvicorn waits for connections.

    uvicorn closes open connections first and runs the app's shutdown after; draining at once
    lets the event streams still open deliver the end of each run (finished, or interrupted
    and recorded) to their followers.
    """

    @override
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        state = getattr(self.config.app, "state", None)  # the FastAPI app Baton passed in
        service = getattr(state, "service", None)
        if service is not None:
            asyncio.get_running_loop().call_soon_threadsafe(service.drain)
        super().handle_exit(sig, frame)


def bounded_http(head_timeout_s: float) -> type[BoundedHttp]:
    """The protocol class for uvicorn's `http=`, with this time for a request's head."""
    return type("BoundedHttp", (BoundedHttp,), {"head_timeout_s": head_timeout_s})
