"""The API's routers, one module each, assembled by `orchestrator.api.app.create_app`."""

from orchestrator.api.routes import (
    agents,
    approvals,
    experiments,
    health,
    memory,
    runs,
    service,
)

__all__ = ["agents", "approvals", "experiments", "health", "memory", "runs", "service"]
