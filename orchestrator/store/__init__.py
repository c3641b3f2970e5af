"""The run store: runs with their status, input, output, error, usage and config."""

from orchestrator.store.store import (
    DEFAULT_STORE_URL,
    DuplicateIdempotencyKey,
    RunPage,
    RunStore,
    StoredRun,
)

__all__ = [
    "DEFAULT_STORE_URL",
    "DuplicateIdempotencyKey",
    "RunPage",
    "RunStore",
    "StoredRun",
]
