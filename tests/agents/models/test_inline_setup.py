"""Baton's model client prepares litellm's requests on the event loop's thread where that is
safe (no worker-thread hop), and keeps what litellm's path gives: cost, usage, retries.

Plain `litellm.acompletion` is the contrast: it starts a worker thread for the same call. If a
litellm upgrade changes how `acompletion` hands its set-up to the executor, the first test says
that the saving is gone (the calls still work: the executor runs them as before). Retries
through a provider prepared inline (`openai/...` on a server of ours) are tested in
test_provider_faults.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import litellm

from agents.core.spec import ModelSpec
from agents.models.client import LiteLLMClient
from agents.models.inline import sets_up_inline

_SCRIPT = {"replies": [{"content": "done"}]}
_MESSAGES = [{"role": "user", "content": "go"}]


def _worker_threads_started(calls: Callable[[], Awaitable[object]]) -> int:
    """How many executor threads a fresh event loop starts while `calls` runs."""
    # Threads themselves, not their idents: a thread that ends meanwhile frees its ident for
    # the new one.
    before = set(threading.enumerate())

    async def main() -> int:
        await calls()
        return sum(
            1 for t in threading.enumerate() if t not in before and t.name.startswith("asyncio")
        )

    return asyncio.run(main())


def test_built_in_model_calls_need_no_worker_thread() -> None:
    client = LiteLLMClient(ModelSpec(name="baton/scripted", params=_SCRIPT))

    async def through_baton() -> None:
        for _ in range(3):
            reply = await client.complete(_MESSAGES, [])
            assert reply.content == "done" and reply.input_tokens > 0
            assert reply.cost_usd == 0.0  # litellm's cost calculation still ran

    async def plain() -> None:
        await litellm.acompletion(model="baton/scripted", messages=_MESSAGES, **_SCRIPT)

    assert _worker_threads_started(plain) >= 1  # the contrast: litellm's own path
    assert _worker_threads_started(through_baton) == 0


def test_which_providers_are_prepared_inline() -> None:
    LiteLLMClient(ModelSpec(name="baton/offline"))  # registers the built-in models
    assert sets_up_inline("baton/offline", {})
    assert sets_up_inline("gpt-4o-mini", {})
    assert sets_up_inline("openai/local", {"api_base": "http://127.0.0.1:9/v1"})
    # Their set-up may fetch credentials over the network: they keep the worker thread.
    assert not sets_up_inline("vertex_ai/gemini-pro", {})
    assert not sets_up_inline("bedrock/anthropic.claude-v2", {})
    assert not sets_up_inline("no-such-provider/model", {})
