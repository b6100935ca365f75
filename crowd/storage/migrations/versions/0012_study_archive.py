"""A study can be archived: kept with its data, left out of the lists an experimenter works
from (the dashboard, GET /api/studies, crowd study list) unless they ask for it

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from crowd.storage.base import UTCDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("studies") as batch:
        batch.add_column(sa.Column("archived_at", UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("studies") as batch:
        batch.drop_column("archived_at")
