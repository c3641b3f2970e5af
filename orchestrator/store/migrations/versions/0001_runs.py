"""runs table

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("requested_agent", sa.String(64)),
        sa.Column("entry_agent", sa.String(64)),
        sa.Column("system", sa.String(64), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("routing", sa.JSON()),
        sa.Column("output", sa.Text()),
        sa.Column("error", sa.Text()),
        sa.Column("input_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("model_calls", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float()),
        sa.Column("finished_at", sa.Float()),
        sa.Column("duration_s", sa.Float()),
        sa.Column("tree", sa.JSON()),
    )
    op.create_index("ix_runs_created_at", "runs", ["created_at"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_entry_agent", "runs", ["entry_agent"])


def downgrade() -> None:
    op.drop_table("runs")
