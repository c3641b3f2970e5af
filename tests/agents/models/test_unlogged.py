"""litellm's success logging is skipped only while no litellm callback would see a call.

A user who registers a litellm callback (Langfuse, a CustomLogger of their own) still gets every
call; without one, Baton's calls do not pay for litellm's logging task (cost and usage still
come back: test_pricing.py, test_inline_setup.py). Plain `litellm.acompletion` is the contrast.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from litellm.integrations.custom_logger import CustomLogger
from litellm.litellm_core_utils.litellm_logging import Logging

from agents.core.spec import ModelSpec
from agents.models.client import LiteLLMClient, configure_litellm

pytestmark = pytest.mark.anyio

_SCRIPT = {"replies": [{"content": "done"}]}
_MESSAGES = [{"role": "user", "content": "go"}]


class _Seen(CustomLogger):
    """A user's callback: remembers the models of the calls it was told about."""

    def __init__(self) -> None:
        super().__init__()
        self.models: list[str] = []
        self.logged = asyncio.Event()

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.models.append(kwargs.get("model", ""))
        self.logged.set()


@pytest.fixture
def success_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The models of the calls litellm ran its success logging for (a spy, not a stand-in)."""
    logged: list[str] = []
    handler = Logging.async_success_handler

    async def spied(self: Logging, *args: Any, **kwargs: Any) -> Any:
        logged.append(self.model)
        return await handler(self, *args, **kwargs)

    monkeypatch.setattr(Logging, "async_success_handler", spied)
    yield logged


async def _settle() -> None:
    """Let litellm's logging tasks queued by the calls so far run."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_calls_without_callbacks_skip_litellms_logging(success_logs: list[str]) -> None:
    configure_litellm()  # makes the built-in models known to plain litellm calls
    await litellm.acompletion(model="baton/scripted", messages=_MESSAGES, **_SCRIPT)
    await _settle()
    assert success_logs == ["scripted"]  # the contrast: litellm's own path logs
    success_logs.clear()
    reply = await LiteLLMClient(ModelSpec(name="baton/scripted", params=_SCRIPT)).complete(
        _MESSAGES, []
    )
    await _settle()
    assert reply.content == "done" and reply.input_tokens > 0 and reply.cost_usd == 0.0
    assert success_logs == []


async def _seen_once(seen: _Seen, params: dict[str, Any]) -> None:
    await LiteLLMClient(ModelSpec(name="baton/scripted", params=params)).complete(_MESSAGES, [])
    await asyncio.wait_for(seen.logged.wait(), timeout=10)
    assert seen.models == ["scripted"]


async def test_a_registered_litellm_callback_still_sees_every_call() -> None:
    seen = _Seen()
    litellm.callbacks = [seen]  # as litellm's documentation has users register one
    try:
        await _seen_once(seen, _SCRIPT)
    finally:  # litellm spreads it over its other lists at the first call
        litellm.logging_callback_manager.remove_callback_from_all_lists(seen)
        litellm.callbacks = []


async def test_a_callback_passed_with_the_models_params_sees_its_calls() -> None:
    seen = _Seen()
    await _seen_once(seen, {**_SCRIPT, "callbacks": [seen]})
