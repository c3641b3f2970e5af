"""threads: conversations whose runs (by their context_id) see the turns before them

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "threads",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
    )
    op.create_index("ix_threads_created_at", "threads", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_threads_created_at", "threads")
    op.drop_table("threads")
