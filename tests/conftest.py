"""Shared fixtures: one real local Ray instance per test session, and no real model calls."""

from __future__ import annotations

import os
from collections.abc import Iterator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import pytest

from agents.model import forbid_remote_models

forbid_remote_models()


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """Start Ray once for the whole session; every Ray test shares it."""
    import ray

    ray.init(
        namespace="baton-tests",
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        # Enforced in every worker too: no test reaches a real model provider.
        runtime_env={"worker_process_setup_hook": "agents.model.forbid_remote_models"},
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
