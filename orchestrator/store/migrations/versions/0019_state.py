"""Shared state: runs.state (the state a run ended with) and threads.state with its version
(what the next turn begins with; a change through the API names the version it read).

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("state", sa.JSON(), nullable=True))
    with op.batch_alter_table("threads") as batch:
        batch.add_column(sa.Column("state", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("state_version", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("threads") as batch:
        batch.drop_column("state_version")
        batch.drop_column("state")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("state")
