"""A worker's standing remembers the latest of their answers its last refresh after an answer
read (`refreshed_through`), so the queue skips the refresh of an answer already covered

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 07:15:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("study_workers") as batch:
        batch.add_column(sa.Column("refreshed_through", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("study_workers") as batch:
        batch.drop_column("refreshed_through")
