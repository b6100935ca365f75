"""Outbox events remember when their in-transaction handlers committed (handled_at), so a
job cut off before its follow-ups (report refresh, training trigger) runs only those again.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import crowd.storage.base

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("handled_at", crowd.storage.base.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("handled_at")
