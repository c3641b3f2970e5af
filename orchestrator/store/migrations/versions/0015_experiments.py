"""experiments: `baton eval`'s results, each case's run and verdicts

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("dataset", sa.String(255), nullable=False),
        sa.Column("dataset_digest", sa.String(64), nullable=False),
        sa.Column("config", sa.String(255), nullable=False),
        sa.Column("config_digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False, server_default="default"),
        sa.Column("results", sa.JSON(), nullable=False),
    )
    op.create_index("ix_experiments_dataset_created_at", "experiments", ["dataset", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_experiments_dataset_created_at", "experiments")
    op.drop_table("experiments")
