"""The run store's tables (SQLAlchemy 2 declarative). Migrations in `migrations/` create them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Float, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["Base", "RunRow"]


class Base(DeclarativeBase):
    pass


class RunRow(Base):
    """One run: what was asked, how it went, and the config it ran with."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(32))
    task: Mapped[str] = mapped_column(Text)
    requested_agent: Mapped[str | None] = mapped_column(String(64))
    entry_agent: Mapped[str | None] = mapped_column(String(64))
    system: Mapped[str] = mapped_column(String(64))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    routing: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    output: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    model_calls: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    duration_s: Mapped[float | None] = mapped_column(Float)
    tree: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    __table_args__ = (
        Index("ix_runs_created_at", "created_at"),
        Index("ix_runs_status", "status"),
        Index("ix_runs_entry_agent", "entry_agent"),
    )
