"""The run store: runs with their status, input, output, error, usage and config.

`RunStore` (SQLAlchemy and Alembic, about 0.4 s to import) is loaded on first use, so that
commands that only talk to a service, and the API's schemas, do without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.store.records import (
    DEFAULT_POOL_SIZE,
    DEFAULT_STORE_URL,
    DEFAULT_STORE_WAIT_S,
    DuplicateIdempotencyKey,
    ForkPoint,
    RunMeta,
    RunPage,
    StoredRun,
    StoreRefused,
    absolute_store_url,
    end_values,
    shown_url,
    store_url_of,
)

if TYPE_CHECKING:
    from orchestrator.store.store import RunStore

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_STORE_URL",
    "DEFAULT_STORE_WAIT_S",
    "DuplicateIdempotencyKey",
    "ForkPoint",
    "RunMeta",
    "RunPage",
    "RunStore",
    "StoreRefused",
    "StoredRun",
    "absolute_store_url",
    "end_values",
    "shown_url",
    "store_url_of",
]


def __getattr__(name: str) -> Any:
    if name == "RunStore":
        from orchestrator.store.store import RunStore

        return RunStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
