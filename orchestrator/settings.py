"""Process settings, read once from the environment at the edge (CLI and service start-up)."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    """`BATON_*` variables; `RAY_ADDRESS` selects a cluster (unset: a local Ray instance)."""

    model_config = SettingsConfigDict(env_prefix="BATON_", extra="ignore")

    config: Path | None = None
    store_url: str = Field(
        default="sqlite+aiosqlite:///baton.db",
        description="Run store: a SQLAlchemy async URL (postgresql+asyncpg://... for PostgreSQL).",
    )
    namespace: str = "baton"
    ray_address: str | None = Field(
        default=None, validation_alias=AliasChoices("RAY_ADDRESS", "BATON_RAY_ADDRESS")
    )
