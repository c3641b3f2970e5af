"""spend: what model replies spent each UTC day, by tenant, key, agent and model

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "spend",
        sa.Column("day", sa.String(10), primary_key=True),
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("who", sa.String(255), primary_key=True),
        sa.Column("agent", sa.String(255), primary_key=True),
        sa.Column("model", sa.String(255), primary_key=True),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("unpriced_calls", sa.Integer(), nullable=False),
    )
    op.create_index("ix_spend_day_who", "spend", ["day", "who"])


def downgrade() -> None:
    op.drop_index("ix_spend_day_who", "spend")
    op.drop_table("spend")
