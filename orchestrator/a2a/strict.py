"""Check an A2A request's body before the a2a-sdk parses it.

- The body must be JSON in UTF-8 (RFC 8259 §8.1): anything else, a body nested too deeply for a
  parser included, is -32700 Parse error with why (the SDK would answer -32603 and log a
  traceback; Python's `json` would also take UTF-16 and UTF-32).
- The SDK parses params with protobuf's `ignore_unknown_fields`, which also turns an unknown
  enum value into 0 (unspecified): a ListTasks `status` of "INVALID" would list every task.
  Baton checks the enums it reads and answers -32602 InvalidParams, naming the field and the
  values it takes.
- A string of the params with U+0000 (NUL) is -32602 InvalidParams naming the field and the
  place: no run store can keep or look up such a text (PostgreSQL refuses it).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.types import TaskState
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agents.core.storable import nul_place

__all__ = ["StrictRequests"]

# (method, field in params) -> the enum it holds.
_ENUMS = {("ListTasks", "status"): TaskState}


class StrictRequests:
    """An ASGI wrapper of the JSON-RPC endpoint: what the module says is answered here."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the body, refuse it or hand it on (as it came) to the endpoint."""
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        refusal = _refusal(body)
        if refusal is not None:
            await _answer(send, refusal)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()  # a disconnect, when it comes
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)


def _refusal(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error for a body that is not UTF-8 JSON or has an unknown enum value.

    None: let it through.
    """
    try:
        request = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return _error(None, -32700, f"Parse error: the body is not UTF-8 (byte {exc.start})")
    except RecursionError:
        return _error(None, -32700, "Parse error: the JSON is nested too deeply")
    except ValueError as exc:
        return _error(None, -32700, f"Parse error: the body is not JSON ({exc})")
    if not isinstance(request, dict) or not isinstance(request.get("params"), dict):
        return None
    if (where := _nul_field(request["params"], "params")) is not None:
        return _error(request.get("id"), -32602, where)
    for (method, field), enum in _ENUMS.items():
        value = request["params"].get(field)
        if request.get("method") != method or value is None:
            continue
        known = value in enum.keys() if isinstance(value, str) else value in enum.values()
        if not known:
            names = ", ".join(enum.keys()[1:])
            message = f"{method}: {field} {value!r} is not one of {names}"
            return _error(request.get("id"), -32602, message)
    return None


def _nul_field(value: Any, path: str) -> str | None:
    """Where the first U+0000 of a JSON value is, in words (None: it has none)."""
    if isinstance(value, str):
        place = nul_place(value)
        return None if place is None else f"{path} has U+0000 (NUL) at character {place}: remove it"
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found = _nul_field(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]")
        if found is not None:
            return found
    return None


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def _answer(send: Send, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
