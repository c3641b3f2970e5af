"""An OpenAI-compatible chat server on 127.0.0.1, so litellm is exercised over real HTTP."""

from __future__ import annotations

import http.server
import json
import threading
import time
from typing import Any

__all__ = ["CHAT_COMPLETIONS_FIELDS", "FakeOpenAI"]

# The request body's fields, as OpenAI's API reference for `POST /v1/chat/completions` lists them.
CHAT_COMPLETIONS_FIELDS = frozenset(
    {
        "messages", "model", "audio", "frequency_penalty", "function_call", "functions",
        "logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities",
        "n", "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key",
        "reasoning_effort", "response_format", "safety_identifier", "seed", "service_tier",
        "stop", "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
        "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
    }
)  # fmt: skip


class FakeOpenAI:
    """Speaks the Chat Completions protocol, plain or streamed (Server-Sent Events).

    It asks for `tool` with `arguments` first; once a tool result is in the conversation it
    answers with text that quotes the result. With `reject_after_tool`, it answers that second
    request as a provider rejecting a key does: 401, quoting the key and the tool result back;
    with `reject_always`, every request so (quoting the whole request: its path and headers).
    Streamed, text comes a word at a time and a tool call in three pieces (its id and name in
    the first only), usage in a last chunk when asked for (`stream_options.include_usage`), as
    OpenAI sends them; `cut_stream_after` chunks, the connection drops mid-stream.

    As a provider over its rate limit: the first `busy_first` requests (every one with
    `busy_always`) are answered 429 with `Retry-After: retry_after` (when set). `arrivals`
    holds each request's arrival (monotonic seconds), refused ones too.
    """

    def __init__(
        self,
        tool: str,
        arguments: dict[str, object],
        *,
        reject_after_tool: bool = False,
        reject_always: bool = False,
        cut_stream_after: int | None = None,
        busy_first: int = 0,
        busy_always: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.arrivals: list[float] = []
        self.refused: list[float] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if fake.arrived():
                    self._busy()
                    return
                fake.requests.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("Authorization"),
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                # A provider's error that quotes the whole request: its path and every header.
                echo = " ".join([self.path, *(f"{k}: {v}" for k, v in self.headers.items())])
                status, payload = fake.respond(body, self.headers.get("Authorization") or "", echo)
                if status == 200 and body.get("stream"):
                    self._stream(fake.chunks(payload, body))
                    return
                reply = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def _busy(self) -> None:
                reply = json.dumps(
                    {"error": {"message": "Rate limit reached", "type": "requests"}}
                ).encode()
                self.send_response(429)
                self.send_header("Content-Type", "application/json")
                if fake.retry_after is not None:
                    self.send_header("Retry-After", f"{fake.retry_after:g}")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def _stream(self, chunks: list[dict[str, Any]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                lines = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
                for i, line in enumerate([*lines, b"data: [DONE]\n\n"]):
                    if i == fake.cut_stream_after:
                        self.close_connection = True
                        return  # the connection drops mid-body
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def log_message(self, *args: object) -> None:
                pass

        self.tool, self.arguments, self.reject_after_tool = tool, arguments, reject_after_tool
        self.reject_always = reject_always
        self.cut_stream_after = cut_stream_after
        self.busy_first, self.busy_always, self.retry_after = busy_first, busy_always, retry_after
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def arrived(self) -> bool:
        """Count a request's arrival; whether it is refused as over the rate limit."""
        with self._lock:
            now = time.monotonic()
            self.arrivals.append(now)
            busy = self.busy_always or len(self.arrivals) <= self.busy_first
            if busy:
                self.refused.append(now)
            return busy

    def respond(self, body: dict, authorization: str, echo: str = "") -> tuple[int, dict]:
        """The answer; a rejection quotes the key, the request (`echo`) and the tool result.

        A field the Chat Completions API does not define is refused, as OpenAI refuses it (so
        that nothing of litellm's or Baton's own bookkeeping may reach a provider)."""
        unknown = sorted(set(body) - CHAT_COMPLETIONS_FIELDS)
        if unknown:
            message = f"Unrecognized request argument supplied: {', '.join(unknown)}"
            return 400, {"error": {"message": message, "type": "invalid_request_error"}}
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if (results and self.reject_after_tool) or self.reject_always:
            key = authorization.removeprefix("Bearer ")
            handling = results[-1] if results else ""
            message = f"Incorrect API key provided: {key} ({echo}). While handling: {handling}"
            return 401, {"error": {"message": message, "type": "invalid_request_error"}}
        return 200, self.reply(body)

    def reply(self, body: dict) -> dict:
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if results:
            message = {"role": "assistant", "content": f"The tool said {results[-1]}"}
            finish = "stop"
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_fake_1",
                        "type": "function",
                        "function": {"name": self.tool, "arguments": json.dumps(self.arguments)},
                    }
                ],
            }
            finish = "tool_calls"
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }

    def chunks(self, reply: dict[str, Any], body: dict[str, Any]) -> list[dict[str, Any]]:
        """A reply as the chunks of a stream."""
        message, finish = reply["choices"][0]["message"], reply["choices"][0]["finish_reason"]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if message.get("content"):
            words = message["content"].split(" ")
            deltas += [{"content": f"{w} "} for w in words[:-1]] + [{"content": words[-1]}]
        for i, call in enumerate(message.get("tool_calls") or []):
            arguments = call["function"]["arguments"]
            third = len(arguments) // 3
            first = {"id": call["id"], "type": "function"}
            pieces = (arguments[:third], arguments[third : 2 * third], arguments[2 * third :])
            for n, piece in enumerate(pieces):
                function = {"arguments": piece}
                if n == 0:
                    function["name"] = call["function"]["name"]
                deltas.append(
                    {
                        "tool_calls": [
                            {"index": i, **(first if n == 0 else {}), "function": function}
                        ]
                    }
                )
        base = {"id": reply["id"], "object": "chat.completion.chunk", "created": reply["created"]}
        base["model"] = reply["model"]
        out = [
            {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
        ]
        out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            out.append({**base, "choices": [], "usage": reply["usage"]})
        return out

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
