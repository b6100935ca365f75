"""Items remember how many of their answers were asked for again because the worker who gave
them was excluded (`replaced`), so asking again is done once per excluded answer

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 23:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.add_column(sa.Column("replaced", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.drop_column("replaced")
