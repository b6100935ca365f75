"""reward-model runs

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-21 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import crowd.storage.base

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
WHEN = crowd.storage.base.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "reward_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("trigger", sa.String(length=50), nullable=False),
        sa.Column("labels", sa.String(length=50), nullable=False),
        sa.Column("labels_at_request", sa.Integer(), nullable=False),
        sa.Column("settings", JSON, nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("metrics", JSON, nullable=False),
        sa.Column("path", sa.String(length=1000), nullable=True),
        sa.Column("job_id", sa.String(length=100), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("started_at", WHEN, nullable=True),
        sa.Column("finished_at", WHEN, nullable=True),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_reward_runs_study_id_studies")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reward_runs")),
    )
    op.create_index("ix_reward_runs_study_status", "reward_runs", ["study_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_reward_runs_study_status", table_name="reward_runs")
    op.drop_table("reward_runs")
