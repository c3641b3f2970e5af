"""service columns (owner lease, idempotency, cancel requests, run options) and run events

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("owner", sa.String(255)))
        batch.add_column(sa.Column("heartbeat_at", sa.Float()))
        batch.add_column(sa.Column("idempotency_key", sa.String(320)))
        batch.add_column(sa.Column("request_hash", sa.String(64)))
        batch.add_column(
            sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("options", sa.JSON()))
        batch.create_unique_constraint("uq_runs_idempotency_key", ["idempotency_key"])
        batch.create_index("ix_runs_owner_status", ["owner", "status"])
    op.create_table(
        "run_events",
        sa.Column(
            "run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_events")
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_owner_status")
        batch.drop_constraint("uq_runs_idempotency_key", type_="unique")
        for column in (
            "options",
            "cancel_requested",
            "request_hash",
            "idempotency_key",
            "heartbeat_at",
            "owner",
        ):
            batch.drop_column(column)
