"""runs.tenant, runs.submitted_by, threads.tenant: what each key may see, and who submitted

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("tenant", sa.String(64), nullable=False, server_default="default")
        )
        batch.add_column(sa.Column("submitted_by", sa.String(255), nullable=True))
        batch.create_index("ix_runs_tenant_created_at", ["tenant", "created_at"])
    with op.batch_alter_table("threads") as batch:
        batch.add_column(
            sa.Column("tenant", sa.String(64), nullable=False, server_default="default")
        )
        batch.create_index("ix_threads_tenant_created_at", ["tenant", "created_at"])


def downgrade() -> None:
    with op.batch_alter_table("threads") as batch:
        batch.drop_index("ix_threads_tenant_created_at")
        batch.drop_column("tenant")
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_tenant_created_at")
        batch.drop_column("submitted_by")
        batch.drop_column("tenant")
