"""litellm's success logging is skipped only while no litellm callback would see a call.

A user who registers a litellm callback (Langfuse, a CustomLogger of their own) still gets every
call; without one, Baton's calls do not pay for litellm's logging task (cost and usage still
come back: test_pricing.py, test_inline_setup.py). Plain `litellm.acompletion` is the contrast.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import litellm
import pytest
from litellm.integrations.custom_logger import CustomLogger
from litellm.litellm_core_utils.litellm_logging import Logging

from agents.core.spec import ModelSpec
from agents.models.client import LiteLLMClient, configure_litellm

pytestmark = pytest.mark.anyio

_SCRIPT = {"replies": [{"content": "done"}]}


def _conversation() -> list[dict[str, Any]]:
    """A conversation of its own, so that logging carried over from other tests' calls (litellm
    moves queued logging tasks onto the next event loop) is told apart from this call's."""
    return [{"role": "user", "content": f"go {uuid.uuid4().hex}"}]


def _said(messages: Any) -> str:
    return str((messages or [{}])[0].get("content", ""))


class _Calls(list[str]):
    """The conversations of the calls seen so far, and a signal at each one."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def add(self, messages: Any) -> None:
        self.append(_said(messages))
        self.changed.set()

    async def until(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(10):
            while True:
                self.changed.clear()
                if condition():
                    return
                await self.changed.wait()


class _Seen(CustomLogger):
    """A user's callback: remembers the conversations of the calls it was told about."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = _Calls()

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.calls.add(kwargs.get("messages"))


@pytest.fixture
def success_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Calls]:
    """The calls whose success logging litellm ran to its end (a spy, not a stand-in)."""
    logged = _Calls()
    handler = Logging.async_success_handler

    async def spied(self: Logging, *args: Any, **kwargs: Any) -> Any:
        try:
            return await handler(self, *args, **kwargs)
        finally:
            logged.add(self.messages)

    monkeypatch.setattr(Logging, "async_success_handler", spied)
    yield logged


async def _settle() -> None:
    """Let litellm's logging tasks queued by the calls so far start."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_calls_without_callbacks_skip_litellms_logging(success_logs: _Calls) -> None:
    configure_litellm()  # makes the built-in models known to plain litellm calls
    plain = _conversation()
    await litellm.acompletion(model="baton/scripted", messages=plain, **_SCRIPT)
    await success_logs.until(lambda: _said(plain) in success_logs)  # the contrast: it logs

    ours = _conversation()
    reply = await LiteLLMClient(ModelSpec(name="baton/scripted", params=_SCRIPT)).complete(ours, [])
    await _settle()
    assert reply.content == "done" and reply.input_tokens > 0 and reply.cost_usd == 0.0
    assert _said(ours) not in success_logs


async def _seen_once(seen: _Seen, params: dict[str, Any]) -> None:
    conversation = _conversation()
    await LiteLLMClient(ModelSpec(name="baton/scripted", params=params)).complete(conversation, [])
    await seen.calls.until(lambda: _said(conversation) in seen.calls)
    await _settle()  # and once only
    assert seen.calls.count(_said(conversation)) == 1


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
