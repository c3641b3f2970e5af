"""What stands in front of the routes: API keys, per-key rate limits, and the body size limit."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from urllib.parse import parse_qsl

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agents.core.storable import nul_place
from orchestrator.access import Access, KeyRing
from orchestrator.oidc import TokenRefused

__all__ = [
    "LOOPBACK_ORIGINS",
    "BodyLimit",
    "KeyCheck",
    "NulRefusal",
    "ProtocolGuard",
    "RateLimiter",
    "still_accepted",
]

LOOPBACK_ORIGINS = ("http://127.0.0.1", "http://localhost", "http://[::1]")
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


@dataclass
class _Bucket:
    tokens: float
    stamp: float


@dataclass
class RateLimiter:
    """A token bucket per caller: `burst` requests at once, refilled at `per_s` a second.

    Memory is bounded: the least recently seen callers are forgotten past `max_callers`
    (a forgotten caller starts again with a full bucket).
    """

    per_s: float
    burst: int
    max_callers: int = 10_000
    _buckets: OrderedDict[str, _Bucket] = field(default_factory=OrderedDict)

    def acquire(self, caller: str) -> float:
        """Take one request for `caller`: 0 when allowed, else seconds until one is."""
        now = time.monotonic()
        bucket = self._buckets.pop(caller, None) or _Bucket(float(self.burst), now)
        bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.stamp) * self.per_s)
        bucket.stamp = now
        self._buckets[caller] = bucket
        while len(self._buckets) > self.max_callers:
            self._buckets.popitem(last=False)
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / self.per_s


def retry_after(seconds: float) -> str:
    """An HTTP `Retry-After` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


# A client still sending its body when the 413 comes sees its connection reset (the socket is
# closed with unread data) instead of the answer: a body up to this size is read and dropped
# first, within `_DRAIN_S`; beyond, the connection is closed on it.
_DRAIN_MAX_BYTES = 16 * 2**20
_DRAIN_S = 10.0


async def _drain(receive: Receive, budget: int) -> None:
    """Read and drop the rest of a request body, up to `budget` bytes and `_DRAIN_S` seconds."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_DRAIN_S):
            while budget > 0:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
                budget -= len(message.get("body", b""))


# A request body at least this large is followed by a collection of young garbage (`BodyLimit`).
_COLLECT_AFTER_BYTES = 256 * 1024


class BodyLimit:
    """Refuses request bodies over `max_bytes` with 413.

    At once when `Content-Length` says so (before anything is read or parsed), else as soon as the
    streamed body goes over.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 413 for a body over the limit."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            if int(declared) <= _DRAIN_MAX_BYTES:
                await _drain(receive, _DRAIN_MAX_BYTES)
            await self._refuse(send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    if message.get("more_body", False):
                        await _drain(receive, _DRAIN_MAX_BYTES - seen)
                    raise HTTPException(413, self._message)
            return message

        try:
            await self.app(scope, counted, send)
        finally:
            if seen >= _COLLECT_AFTER_BYTES:
                # A large body refused by a parser (nested too deeply, say) stays referenced
                # from a cycle of the error's traceback frames, and the service collects young
                # garbage only every `gc_policy.YOUNG_THRESHOLD` allocations, which such requests
                # barely make: 50 of 1 MiB each grew it by 97 MiB. Collected now, it is freed.
                gc.collect(1)

    @property
    def _message(self) -> str:
        return f"the request body is larger than {self.max_bytes} bytes"

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {"error": {"code": "payload_too_large", "message": self._message}}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class NulRefusal:
    """Refuses a request whose path or query has U+0000 (NUL) with 422, naming where.

    No store can keep or look up such a text (PostgreSQL refuses it): the answer says so, on
    every store, rather than a query finding nothing (or, on PostgreSQL, failing).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 422 for a NUL in its path or query."""
        if scope["type"] == "http":
            said = _nul_in(scope)
            if said is not None:
                await _refuse(send, 422, "validation_error", said)
                return
        await self.app(scope, receive, send)


def _nul_in(scope: Scope) -> str | None:
    """Where a request's path or query has a U+0000, in words (None: nowhere)."""
    path = str(scope.get("path", ""))
    if (place := nul_place(path)) is not None:
        return f"the path has U+0000 (NUL) at character {place}: remove it"
    query = scope.get("query_string", b"").decode("latin-1")
    if "%00" not in query and "\x00" not in query:
        return None
    for name, value in parse_qsl(query, keep_blank_values=True):
        for text, what in ((name, "a query parameter's name"), (value, f"query parameter {name}")):
            if (place := nul_place(text)) is not None:
                return f"{what} has U+0000 (NUL) at character {place}: remove it"
    return None


class KeyCheck:
    """Names the caller of a guarded path, or refuses it (401) before anything reads its body.

    On the guarded paths (`/v1/...`, the protocol endpoints) the caller's `Access` (its key's
    name, tenant and roles; without keys, its address with every role) becomes the request's
    `auth` (`request.auth`, the a2a-sdk's `ServerCallContext.state["auth"]`); the routes' own
    guards then check its role and apply its rate limit. A caller without a key never has a
    body read, parsed or drained on its behalf. A long answer (an event stream) asks again,
    from time to time, whether the credential still holds: `still_accepted(scope)`.
    """

    def __init__(self, app: ASGIApp, keys: KeyRing, guarded: tuple[str, ...]) -> None:
        self.app = app
        self.keys = keys
        self.guarded = guarded

    def _is_guarded(self, scope: Scope) -> bool:
        path: str = scope["path"]
        if path == "/":  # the UI's page; A2A's JSON-RPC when posted
            return bool(scope["method"] == "POST")
        return any(path == p or path.startswith(p + "/") for p in self.guarded)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 401 at once."""
        if scope["type"] == "http" and self._is_guarded(scope):
            if self.keys.enabled:
                presented = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
                try:
                    access = await self.keys.bearer(presented)
                except TokenRefused as refused:
                    await _refuse(send, 401, "unauthorized", str(refused))
                    return
                if access is None:
                    await _refuse(send, 401, "unauthorized", "a valid API key is required")
                    return
                scope["credential"] = partial(self._still, presented)
            else:
                client = scope.get("client")
                access = Access(f"ip:{client[0] if client else 'unknown'}")
            scope["auth"] = access
        await self.app(scope, receive, send)

    async def _still(self, presented: str) -> bool:
        try:
            return await self.keys.bearer(presented) is not None
        except TokenRefused:  # (expired since, say)
            return False


async def still_accepted(scope: Scope) -> bool:
    """Whether the credential a request came with is still accepted (revoked keys are not)."""
    check = scope.get("credential")
    return True if check is None else bool(await check())


class ProtocolGuard:
    """In front of `/mcp` and `/a2a`: Origin and Host checks, API keys, the per-caller rate limit.

    The Origin check stops browsers' cross-site requests and DNS rebinding; the Host check applies
    to a loopback-only service.

    Args:
        app: the protocol's endpoint (MCP's, A2A's JSON-RPC).
        keys: the API's keys (none: only loopback may be served, and the Host is checked).
        limiter: the API's rate limiter (shared: one budget per caller).
        origins: allowed Origin values besides loopback ones (scheme://host[:port]).
    """

    def __init__(
        self, app: ASGIApp, keys: KeyRing, limiter: RateLimiter, origins: Iterable[str] = ()
    ) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter
        self.origins = tuple(origins)

    def _origin_ok(self, origin: str) -> bool:
        if origin in self.origins:
            return True
        return any(origin == o or origin.startswith(o + ":") for o in LOOPBACK_ORIGINS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on to the MCP endpoint, or refuse it with the reason."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin):
            await _refuse(send, 403, "forbidden", f"Origin {origin!r} is not allowed")
            return
        if not self.keys.enabled:
            host = headers.get("host", "").rsplit(":", 1)[0] if headers.get("host") else ""
            if host not in _LOOPBACK_HOSTS:
                await _refuse(send, 421, "misdirected", "this service answers on loopback only")
                return
        access = scope.get("auth")
        if not isinstance(access, Access):  # (`KeyCheck` names every caller of these paths)
            await _refuse(send, 401, "unauthorized", "a valid API key is required")
            return
        wait = self.limiter.acquire(access.who)
        if wait:
            await _refuse(send, 429, "rate_limited", "rate limit exceeded; slow down", wait)
            return
        await self.app(scope, receive, send)


async def _refuse(
    send: Send, status: int, code: str, message: str, wait_s: float | None = None
) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "details": None}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if wait_s is not None:
        headers.append((b"retry-after", retry_after(wait_s).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
