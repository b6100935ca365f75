"""What we keep of each experimenter's account on a platform (Prolific: the participant group
of the workers they blocked, which their studies exclude)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import crowd.storage.base

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
WHEN = crowd.storage.base.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "platform_accounts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experimenter_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=50), nullable=False),
        sa.Column("settings", JSON, nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["experimenter_id"],
            ["experimenters.id"],
            name=op.f("fk_platform_accounts_experimenter_id_experimenters"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_platform_accounts")),
        sa.UniqueConstraint(
            "experimenter_id", "provider", name=op.f("uq_platform_accounts_experimenter_id_provider")
        ),
    )


def downgrade() -> None:
    op.drop_table("platform_accounts")
