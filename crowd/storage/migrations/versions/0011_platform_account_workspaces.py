"""What we keep of an experimenter's platform account is kept per workspace of it (Prolific:
one group of blocked participants per workspace the experimenter publishes in, since a study
excludes the group of its own workspace)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
ACCOUNTS = sa.table(
    "platform_accounts",
    sa.column("id", sa.Integer()),
    sa.column("experimenter_id", sa.Integer()),
    sa.column("provider", sa.String()),
    sa.column("workspace", sa.String()),
    sa.column("settings", JSON),
)


def upgrade() -> None:
    with op.batch_alter_table("platform_accounts") as batch:
        batch.add_column(
            sa.Column("workspace", sa.String(length=100), nullable=False, server_default="")
        )
    # A row of 0010 is the group of the workspace it was made in.
    connection = op.get_bind()
    for row_id, settings in connection.execute(sa.select(ACCOUNTS.c.id, ACCOUNTS.c.settings)):
        workspace = str((settings or {}).get("workspace_id") or "")
        if workspace:
            connection.execute(
                ACCOUNTS.update().where(ACCOUNTS.c.id == row_id).values(workspace=workspace)
            )
    with op.batch_alter_table("platform_accounts") as batch:
        batch.alter_column("workspace", server_default=None)
        batch.drop_constraint("uq_platform_accounts_experimenter_id_provider", type_="unique")
        batch.create_unique_constraint(
            "uq_platform_accounts_experimenter_id_provider_workspace",
            ["experimenter_id", "provider", "workspace"],
        )


def downgrade() -> None:
    # 0010 kept one row per experimenter and platform: the first one made stays (the groups
    # of the other workspaces stay on the platform, unused).
    connection = op.get_bind()
    first = sa.select(sa.func.min(ACCOUNTS.c.id)).group_by(
        ACCOUNTS.c.experimenter_id, ACCOUNTS.c.provider
    )
    connection.execute(ACCOUNTS.delete().where(ACCOUNTS.c.id.not_in(first)))
    with op.batch_alter_table("platform_accounts") as batch:
        batch.drop_constraint(
            "uq_platform_accounts_experimenter_id_provider_workspace", type_="unique"
        )
        batch.create_unique_constraint(
            "uq_platform_accounts_experimenter_id_provider", ["experimenter_id", "provider"]
        )
        batch.drop_column("workspace")
