"""A gold item's tally weighs each answer by its reader's agreement with the crowd: the count
of answers (`gold_answers`) becomes their weight (`gold_weight`, a real number), recounted in
every QC refresh (crowd.quality.tally); the counts stored so far stand until then (each
answer weighing 1)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29 23:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.alter_column(
            "gold_answers",
            new_column_name="gold_weight",
            type_=sa.Double(),
            existing_type=sa.Integer(),
            existing_nullable=False,
            existing_server_default="0",
        )


def downgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.alter_column(
            "gold_weight",
            new_column_name="gold_answers",
            type_=sa.Integer(),
            existing_type=sa.Double(),
            existing_nullable=False,
            existing_server_default="0",
        )
