"""Gold items keep a tally of their live answers' gold accuracy (`gold_answers`, `gold_right`),
so serving can put the gold its readers get right first without reading every answer

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.add_column(
            sa.Column("gold_answers", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("gold_right", sa.Float(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.drop_column("gold_right")
        batch.drop_column("gold_answers")
