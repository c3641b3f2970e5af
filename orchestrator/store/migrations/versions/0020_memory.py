"""memory: long-term items per tenant, namespace and key, searchable by text

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("namespace", sa.String(528), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("written_by", sa.String(255), nullable=True),
    )
    op.create_index("ix_memory_tenant_updated_at", "memory", ["tenant", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_memory_tenant_updated_at", "memory")
    op.drop_table("memory")
