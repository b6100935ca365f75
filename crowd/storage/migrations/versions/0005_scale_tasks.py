"""Scale-compatible projects, batches and tasks

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21 13:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import crowd.storage.base

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON = crowd.storage.base.JSONType
UTC = crowd.storage.base.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "scale_accounts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experimenter_id", sa.Integer(), nullable=False),
        sa.Column("callback_auth_key", sa.String(length=100), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(["experimenter_id"], ["experimenters.id"], name=op.f("fk_scale_accounts_experimenter_id_experimenters")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scale_accounts")),
        sa.UniqueConstraint("experimenter_id", name=op.f("uq_scale_accounts_experimenter_id")),
    )

    op.create_table(
        "scale_projects",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experimenter_id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=50), nullable=False),
        sa.Column("params", JSON, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(["experimenter_id"], ["experimenters.id"], name=op.f("fk_scale_projects_experimenter_id_experimenters")),
        sa.ForeignKeyConstraint(["study_id"], ["studies.id"], name=op.f("fk_scale_projects_study_id_studies")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scale_projects")),
        sa.UniqueConstraint("experimenter_id", "name", name=op.f("uq_scale_projects_experimenter_id_name")),
        sa.UniqueConstraint("study_id", name=op.f("uq_scale_projects_study_id")),
    )
    with op.batch_alter_table("scale_projects", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_scale_projects_experimenter_id"), ["experimenter_id"], unique=False)

    op.create_table(
        "scale_batches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experimenter_id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("meta", JSON, nullable=False),
        sa.Column("callback", sa.String(length=2000), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("finalized_at", UTC, nullable=True),
        sa.ForeignKeyConstraint(["experimenter_id"], ["experimenters.id"], name=op.f("fk_scale_batches_experimenter_id_experimenters")),
        sa.ForeignKeyConstraint(["project_id"], ["scale_projects.id"], name=op.f("fk_scale_batches_project_id_scale_projects")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scale_batches")),
        sa.UniqueConstraint("experimenter_id", "name", name=op.f("uq_scale_batches_experimenter_id_name")),
    )
    with op.batch_alter_table("scale_batches", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_scale_batches_experimenter_id"), ["experimenter_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_scale_batches_project_id"), ["project_id"], unique=False)

    op.create_table(
        "scale_tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(length=32), nullable=False),
        sa.Column("experimenter_id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=True),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=50), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("instruction", sa.Text(), nullable=True),
        sa.Column("params", JSON, nullable=False),
        sa.Column("meta", JSON, nullable=False),
        sa.Column("tags", JSON, nullable=False),
        sa.Column("unique_id", sa.String(length=200), nullable=True),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("callback_url", sa.String(length=2000), nullable=True),
        sa.Column("target", sa.Integer(), nullable=True),
        sa.Column("expected_response", JSON, nullable=True),
        sa.Column("response", JSON, nullable=True),
        sa.Column("audits", JSON, nullable=False),
        sa.Column("customer_review_status", sa.String(length=20), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.Column("completed_at", UTC, nullable=True),
        sa.Column("callback_succeeded", sa.Boolean(), nullable=True),
        sa.Column("delivery_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["batch_id"], ["scale_batches.id"], name=op.f("fk_scale_tasks_batch_id_scale_batches")),
        sa.ForeignKeyConstraint(["experimenter_id"], ["experimenters.id"], name=op.f("fk_scale_tasks_experimenter_id_experimenters")),
        sa.ForeignKeyConstraint(["item_id"], ["items.id"], name=op.f("fk_scale_tasks_item_id_items")),
        sa.ForeignKeyConstraint(["project_id"], ["scale_projects.id"], name=op.f("fk_scale_tasks_project_id_scale_projects")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scale_tasks")),
        sa.UniqueConstraint("experimenter_id", "unique_id", name=op.f("uq_scale_tasks_experimenter_id_unique_id")),
        sa.UniqueConstraint("item_id", name=op.f("uq_scale_tasks_item_id")),
        sa.UniqueConstraint("task_id", name=op.f("uq_scale_tasks_task_id")),
    )
    with op.batch_alter_table("scale_tasks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_scale_tasks_batch_id"), ["batch_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_scale_tasks_completed_at"), ["completed_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_scale_tasks_delivery_id"), ["delivery_id"], unique=False)
        batch_op.create_index("ix_scale_tasks_listing", ["experimenter_id", "kind", "id"], unique=False)
        batch_op.create_index("ix_scale_tasks_project_status", ["project_id", "status"], unique=False)

    op.create_table(
        "scale_task_tags",
        sa.Column("task_pk", sa.Integer(), nullable=False),
        sa.Column("tag", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(["task_pk"], ["scale_tasks.id"], name=op.f("fk_scale_task_tags_task_pk_scale_tasks")),
        sa.PrimaryKeyConstraint("task_pk", "tag", name=op.f("pk_scale_task_tags")),
    )
    with op.batch_alter_table("scale_task_tags", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_scale_task_tags_tag"), ["tag"], unique=False)

    op.create_table(
        "scale_idempotent_replies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experimenter_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("body", JSON, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(["experimenter_id"], ["experimenters.id"], name=op.f("fk_scale_idempotent_replies_experimenter_id_experimenters")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scale_idempotent_replies")),
        sa.UniqueConstraint("experimenter_id", "key", name=op.f("uq_scale_idempotent_replies_experimenter_id_key")),
    )


def downgrade() -> None:
    op.drop_table("scale_idempotent_replies")
    with op.batch_alter_table("scale_task_tags", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_scale_task_tags_tag"))

    op.drop_table("scale_task_tags")
    with op.batch_alter_table("scale_tasks", schema=None) as batch_op:
        batch_op.drop_index("ix_scale_tasks_project_status")
        batch_op.drop_index("ix_scale_tasks_listing")
        batch_op.drop_index(batch_op.f("ix_scale_tasks_delivery_id"))
        batch_op.drop_index(batch_op.f("ix_scale_tasks_completed_at"))
        batch_op.drop_index(batch_op.f("ix_scale_tasks_batch_id"))

    op.drop_table("scale_tasks")
    with op.batch_alter_table("scale_batches", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_scale_batches_project_id"))
        batch_op.drop_index(batch_op.f("ix_scale_batches_experimenter_id"))

    op.drop_table("scale_batches")
    with op.batch_alter_table("scale_projects", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_scale_projects_experimenter_id"))

    op.drop_table("scale_projects")
    op.drop_table("scale_accounts")
