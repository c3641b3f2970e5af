"""runs.began_on: the version of the team a run began on (`version` says the one it runs on)

A run resumed on another version of the team is finished by that one: `version` follows it,
and `began_on` keeps where it began. Rows made before: they began on their `version`.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("began_on", sa.String(80), nullable=True))
    op.execute("UPDATE runs SET began_on = version")


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("began_on")
