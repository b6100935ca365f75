"""A gold item's tally weighs each answer by its reader's agreement with the crowd: the count
of answers (`gold_answers`) becomes their weight (`gold_weight`, a real number), recounted in
every QC refresh (crowd.quality.tally); the counts stored so far stand until then (each
answer weighing 1)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29 23:30:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _rename("gold_answers", sa.Integer(), "gold_weight", sa.Double())


def downgrade() -> None:
    _rename("gold_weight", sa.Double(), "gold_answers", sa.Integer())


def _rename(
    old: str, old_type: sa.types.TypeEngine[Any], new: str, new_type: sa.types.TypeEngine[Any]
) -> None:
    with op.batch_alter_table("items") as batch:
        batch.alter_column(old, new_column_name=new, type_=new_type, existing_type=old_type,
                           existing_nullable=False, existing_server_default="0")  # fmt: skip
