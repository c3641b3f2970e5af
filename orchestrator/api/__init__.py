"""The HTTP API: FastAPI routes over the run service."""

from orchestrator.api.app import ApiOptions, create_app

__all__ = ["ApiOptions", "create_app"]
