"""crowd-platform publications and sessions

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21 13:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import crowd.storage.base

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
WHEN = crowd.storage.base.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "publications",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=50), nullable=False),
        sa.Column("options", JSON, nullable=False),
        sa.Column("remote", JSON, nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_publications_study_id_studies")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_publications")),
    )
    op.create_index(op.f("ix_publications_study_id"), "publications", ["study_id"])
    op.create_table(
        "remote_tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("publication_id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=50), nullable=False),
        sa.Column("remote_id", sa.String(length=100), nullable=False),
        sa.Column("places", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("expires_at", WHEN, nullable=True),
        sa.Column("synced_at", WHEN, nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.ForeignKeyConstraint(
            ["publication_id"],
            ["publications.id"],
            name=op.f("fk_remote_tasks_publication_id_publications"),
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_remote_tasks_study_id_studies")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_remote_tasks")),
        sa.UniqueConstraint(
            "provider", "remote_id", name=op.f("uq_remote_tasks_provider_remote_id")
        ),
    )
    op.create_index(op.f("ix_remote_tasks_publication_id"), "remote_tasks", ["publication_id"])
    op.create_index(op.f("ix_remote_tasks_study_id"), "remote_tasks", ["study_id"])
    op.create_table(
        "platform_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("remote_task_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=50), nullable=False),
        sa.Column("remote_id", sa.String(length=100), nullable=False),
        sa.Column("submission_id", sa.String(length=100), nullable=True),
        sa.Column("submit_to", sa.String(length=300), nullable=True),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("remote_state", sa.String(length=50), nullable=True),
        sa.Column("items_done", sa.Integer(), nullable=False),
        sa.Column("completion_code", sa.String(length=40), nullable=True),
        sa.Column("problems", JSON, nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.Column("submitted_at", WHEN, nullable=True),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_platform_sessions_study_id_studies")
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"], ["workers.id"], name=op.f("fk_platform_sessions_worker_id_workers")
        ),
        sa.ForeignKeyConstraint(
            ["remote_task_id"],
            ["remote_tasks.id"],
            name=op.f("fk_platform_sessions_remote_task_id_remote_tasks"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_platform_sessions")),
        sa.UniqueConstraint(
            "provider", "remote_id", name=op.f("uq_platform_sessions_provider_remote_id")
        ),
    )
    op.create_index(
        "ix_platform_sessions_study_worker", "platform_sessions", ["study_id", "worker_id"]
    )
    op.create_index(
        op.f("ix_platform_sessions_remote_task_id"), "platform_sessions", ["remote_task_id"]
    )
    op.create_table(
        "platform_actions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=50), nullable=False),
        sa.Column("action", sa.String(length=30), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=True),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        sa.Column("session_id", sa.Integer(), nullable=True),
        sa.Column("params", JSON, nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("result", JSON, nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("done_at", WHEN, nullable=True),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_platform_actions_study_id_studies")
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"], ["workers.id"], name=op.f("fk_platform_actions_worker_id_workers")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["platform_sessions.id"],
            name=op.f("fk_platform_actions_session_id_platform_sessions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_platform_actions")),
    )
    op.create_index(
        "ix_platform_actions_status", "platform_actions", ["status", "created_at"]
    )
    with op.batch_alter_table("assignments") as batch_op:
        batch_op.add_column(sa.Column("platform_session_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            op.f("fk_assignments_platform_session_id_platform_sessions"),
            "platform_sessions",
            ["platform_session_id"],
            ["id"],
        )
        batch_op.create_index(
            op.f("ix_assignments_platform_session_id"), ["platform_session_id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("assignments") as batch_op:
        batch_op.drop_index(op.f("ix_assignments_platform_session_id"))
        batch_op.drop_constraint(
            op.f("fk_assignments_platform_session_id_platform_sessions"), type_="foreignkey"
        )
        batch_op.drop_column("platform_session_id")
    op.drop_table("platform_actions")
    op.drop_table("platform_sessions")
    op.drop_table("remote_tasks")
    op.drop_table("publications")
