"""litellm's request set-up on the event loop's thread, for providers whose set-up does no I/O.

`litellm.acompletion` runs the synchronous `completion` (argument mapping, logging set-up) in
the loop's default executor and awaits the coroutine it returns, which makes the request. For
the providers below that set-up is pure CPU: the hop to a worker thread and back costs more than
the work (one GIL hand-off each way and a wake-up of the loop), and while the worker holds the GIL
the loop cannot run anyway. Measured with the built-in model on a 2-core machine: 0.80-0.89 ms
of CPU per call inline against 0.95-1.24 ms through the executor, more in an agent host whose
Ray threads also want the GIL.

Everything else of litellm's path is unchanged (the `acompletion` wrapper's retries, usage,
cost, callbacks). Providers whose set-up may fetch credentials over the network (Vertex AI,
Bedrock, SageMaker, Azure AD, watsonx, ...) keep the worker thread, as does any other use of the
default executor (DNS lookups, `asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import agents.models.litellm_env  # noqa: F401  (litellm reads these settings at import)

# isort: split
import litellm
import litellm.main

__all__ = ["inline_setup", "sets_up_inline"]

# Providers whose `completion` set-up only maps arguments and builds (or reuses) an HTTP
# client: the request itself is made by the coroutine it returns.
_INLINE_PROVIDERS = frozenset(
    {
        "baton",  # the built-in models (agents.models.providers)
        "openai",
        "anthropic",
        "hosted_vllm",
        "openrouter",
        "groq",
        "mistral",
        "deepseek",
        "xai",
        "gemini",
    }
)

_inline: contextvars.ContextVar[bool] = contextvars.ContextVar("baton_inline_setup", default=False)
_installed: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def sets_up_inline(model: str, params: dict[str, Any]) -> bool:
    """Whether `model`'s litellm set-up may run on the event loop's thread."""
    explicit = params.get("custom_llm_provider")
    if isinstance(explicit, str):
        return explicit in _INLINE_PROVIDERS
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=model, api_base=params.get("api_base"))
    except Exception:  # a model litellm does not know: it will say so itself, in the executor
        return False
    return provider in _INLINE_PROVIDERS


class _InlineSetupExecutor(ThreadPoolExecutor):
    """The loop's default executor: litellm's set-up inline when asked (`inline_setup`).

    Everything else it runs in its threads, as the executor it replaces did.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if not args and not kwargs and _inline.get() and _is_completion_setup(fn):
            future: Future[Any] = Future()
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the awaiting caller, as from a thread
                future.set_exception(exc)
            return future
        return super().submit(fn, *args, **kwargs)


def _is_completion_setup(fn: Callable[..., Any]) -> bool:
    # `acompletion` submits partial(context.run, partial(completion, **kwargs)).
    if not isinstance(fn, functools.partial) or len(fn.args) != 1:
        return False
    inner = fn.args[0]
    return isinstance(inner, functools.partial) and inner.func is litellm.main.completion


@contextmanager
def inline_setup(enabled: bool) -> Iterator[None]:
    """Within this block, `litellm.acompletion` sets its request up on this thread."""
    if not enabled:
        yield
        return
    loop = asyncio.get_running_loop()
    if loop not in _installed:
        loop.set_default_executor(_InlineSetupExecutor(thread_name_prefix="asyncio"))
        _installed.add(loop)
    token = _inline.set(True)
    try:
        yield
    finally:
        _inline.reset(token)
