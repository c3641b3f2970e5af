"""What stands in front of the routes: API keys, per-key rate limits, and the body size limit."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit", "KeyRing", "RateLimiter"]


class KeyRing:
    """The accepted API keys. A presented key is compared with every accepted one in constant
    time, so neither timing nor which key matched leaks; keys are held only as given, never
    logged, and callers are named by a hash of their key."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._keys = [k.encode() for k in keys]

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def principal(self, presented: str) -> str | None:
        """The caller's name (`key:` plus a short hash) when `presented` is accepted."""
        candidate = presented.encode()
        matched = False
        for key in self._keys:  # no early exit: every key is compared
            matched |= hmac.compare_digest(candidate, key)
        if not matched:
            return None
        return "key:" + hashlib.sha256(candidate).hexdigest()[:16]


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


class BodyLimit:
    """Refuses request bodies over `max_bytes` with 413: at once when `Content-Length` says so
    (before anything is read or parsed), else as soon as the streamed body goes over."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, self._message)
            return message

        await self.app(scope, counted, send)

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
