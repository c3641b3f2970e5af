"""runs.context_id: the conversation a run belongs to (an A2A contextId), indexed for listing

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("context_id", sa.String(255), nullable=True))
        batch.create_index("ix_runs_context_id", ["context_id"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_context_id")
        batch.drop_column("context_id")
