"""Scale projects remember `rapid` and batches `calibration_batch` and `self_label_batch`, as
sent and echoed back (HELM's client creates rapid projects and plain batches)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scale_projects") as batch:
        batch.add_column(
            sa.Column("rapid", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("scale_batches") as batch:
        for name in ("calibration_batch", "self_label_batch"):
            batch.add_column(
                sa.Column(name, sa.Boolean(), nullable=False, server_default=sa.false())
            )


def downgrade() -> None:
    with op.batch_alter_table("scale_batches") as batch:
        batch.drop_column("self_label_batch")
        batch.drop_column("calibration_batch")
    with op.batch_alter_table("scale_projects") as batch:
        batch.drop_column("rapid")
