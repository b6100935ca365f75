"""per-item targets and serving ranks, rater groups on responses

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("target", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("rank", sa.Integer(), server_default="0", nullable=False))
    with op.batch_alter_table("responses", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("rater_group", sa.String(length=100), server_default="crowd", nullable=False)
        )
        batch_op.create_index(
            "ix_responses_study_group", ["study_id", "rater_group"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("responses", schema=None) as batch_op:
        batch_op.drop_index("ix_responses_study_group")
        batch_op.drop_column("rater_group")
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_column("rank")
        batch_op.drop_column("target")
