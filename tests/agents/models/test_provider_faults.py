"""A model provider that fails, as a real HTTP server on 127.0.0.1 behind an `openai/...` model:
bounded retries with backoff, then the invocation fails cleanly with the provider's error, and
a provider that never answers is cut off by the model timeout, streamed or not. Nothing hangs."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator

import pytest

from agents.core.messages import AgentResult, Delegation, RunContext, RunStatus
from agents.core.spec import AgentSpec, ModelSpec, Timeouts
from agents.models.client import LiteLLMClient
from agents.runtime.agent import AgentRuntime

pytestmark = pytest.mark.anyio


class FaultyProvider:
    """Answers every chat request with `status` (429 with Retry-After: 1), or never answers."""

    def __init__(self, status: int | None) -> None:
        self.hits: list[float] = []
        self._release = threading.Event()
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                provider.hits.append(time.monotonic())
                if status is None:
                    provider._release.wait(30)  # a provider that hangs
                    return
                body = json.dumps(
                    {"error": {"message": f"provider says {status}", "type": "server_error"}}
                ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if status == 429:
                    self.send_header("Retry-After", "1")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()


@pytest.fixture
def provider(request: pytest.FixtureRequest) -> Iterator[FaultyProvider]:
    fake = FaultyProvider(request.param)
    yield fake
    fake.close()


async def invoke(
    provider: FaultyProvider, model_timeout_s: float = 30, stream: bool = False
) -> tuple[float, AgentResult]:
    spec = AgentSpec(name="asker", timeouts=Timeouts(model=model_timeout_s))
    model = LiteLLMClient(
        ModelSpec(name="openai/gpt-4o-mini", params={"api_base": provider.url, "api_key": "k"})
    )
    context = RunContext(
        run_id="faulty", chain=("asker",), deadline=time.time() + 60, stream=stream
    )
    began = time.monotonic()
    result = await AgentRuntime(spec, model).invoke(Delegation(task="hi", context=context))
    return time.monotonic() - began, result


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(
    ("provider", "error"), [(429, "RateLimitError"), (500, "InternalServerError")],
    indirect=["provider"],
)  # fmt: skip
async def test_a_failing_provider_is_retried_with_backoff_then_the_call_fails_with_its_error(
    provider: FaultyProvider, error: str, stream: bool
) -> None:
    took, result = await invoke(provider, stream=stream)
    assert result.status == RunStatus.FAILED
    assert result.error is not None
    assert error in result.error and "provider says" in result.error
    assert len(provider.hits) == 3  # the first attempt and two retries, no more
    gaps = [b - a for a, b in zip(provider.hits, provider.hits[1:], strict=False)]
    assert all(gap >= 0.3 for gap in gaps), gaps  # backed off (429: Retry-After honoured)
    assert took < 15


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_a_provider_that_never_answers_is_cut_off_by_the_model_timeout(
    provider: FaultyProvider, stream: bool
) -> None:
    took, result = await invoke(provider, model_timeout_s=1.5, stream=stream)
    assert result.status == RunStatus.FAILED
    assert result.error == "model call timed out after 1.5s"
    assert took < 5 and len(provider.hits) == 1
