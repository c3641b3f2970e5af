"""litellm's success logging skipped for calls that no litellm callback would see.

After every call, `acompletion` queues a task that builds litellm's standard logging payload
(prices the call again, copies its metadata, diagnoses a zero cost) and hands it to the
registered callbacks. Baton registers none: its spans, usage and cost come from the response
itself, where litellm has already put them (`usage`, `_hidden_params["response_cost"]`, set
before `acompletion` returns). Measured in an agent host running a chain of 16 agents on the
built-in model: that task was 13% of the host's event-loop time.

litellm's own switch for it is the context variable it sets for its internal sub-calls ("no
async logging and billing"); retries, usage and the response's cost do not read it. It is set
only while nothing could miss the log: no callback registered in the process (a user's
`litellm.callbacks = [...]` turns this off at once) and none passed with the model's params.
Without that variable (another litellm version), calls are logged as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import agents.models.litellm_env  # noqa: F401  (litellm reads these settings at import)

# isort: split
import litellm

__all__ = ["unlogged"]

try:
    from litellm._internal_context import is_internal_call as _switch
except ImportError:  # a litellm without it: every call is logged
    _switch: ContextVar[bool] | None = None  # type: ignore[no-redef]

# Where litellm keeps callbacks registered for the whole process, and the call parameters that
# register some for one call.
_GLOBAL_LISTS = (
    "callbacks",
    "success_callback",
    "_async_success_callback",
    "failure_callback",
    "_async_failure_callback",
    "input_callback",
    "service_callback",
)
_CALL_PARAMS = frozenset({"callbacks", "success_callback", "failure_callback"})


def _would_log(params: Mapping[str, Any]) -> bool:
    """Whether a litellm callback, the process's or the call's own, would see a call."""
    return any(getattr(litellm, name, None) for name in _GLOBAL_LISTS) or any(
        params.get(name) for name in _CALL_PARAMS
    )


@contextmanager
def unlogged(params: Mapping[str, Any]) -> Iterator[None]:
    """Within this block, litellm skips its success logging unless a callback would see it."""
    if _switch is None or _would_log(params):
        yield
        return
    token = _switch.set(True)
    try:
        yield
    finally:
        _switch.reset(token)
