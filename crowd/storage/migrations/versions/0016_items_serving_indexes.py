"""Items get the indexes serving reads (crowd.work): the open items counted from an index
alone, the next item taken in serving order without sorting the study's items

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 15:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ix_items_open starts with ix_items_study_kind's columns: that one goes.
    op.create_index("ix_items_open", "items", ["study_id", "kind", "holders", "target"])
    op.create_index(
        "ix_items_serving", "items", ["study_id", "kind", "rank", sa.text("holders DESC"), "id"]
    )
    op.drop_index("ix_items_study_kind", table_name="items")


def downgrade() -> None:
    op.create_index("ix_items_study_kind", "items", ["study_id", "kind"])
    op.drop_index("ix_items_serving", table_name="items")
    op.drop_index("ix_items_open", table_name="items")
