"""Gold items keep a tally of their live answers' gold accuracy (`gold_answers`, `gold_right`),
so serving can put the gold its readers get right first without reading every answer

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.add_column(
            sa.Column("gold_answers", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("gold_right", sa.Double(), nullable=False, server_default="0"))
    backfill(op.get_bind())


def backfill(bind: sa.Connection) -> None:
    """Each gold item's tally from the live gold answers already stored, so a running study
    keeps what its readers showed."""
    items = sa.table("items", sa.column("id", sa.Integer()), sa.column("kind", sa.String()),
                     sa.column("gold_answers", sa.Integer()),
                     sa.column("gold_right", sa.Double()))  # fmt: skip
    responses = sa.table("responses", sa.column("item_id", sa.Integer()),
                         sa.column("source", sa.String()),
                         sa.column("qc_flags", sa.JSON()))  # fmt: skip
    found = bind.execute(
        sa.select(responses.c.item_id, responses.c.qc_flags)
        .join(items, items.c.id == responses.c.item_id)
        .where(items.c.kind == "gold", responses.c.source == "live")
    )
    tally: dict[int, tuple[int, float]] = {}
    for item_id, flags in found:
        accuracy = (flags or {}).get("gold_accuracy")
        if accuracy is not None:
            answers, right = tally.get(item_id, (0, 0.0))
            tally[item_id] = (answers + 1, right + float(accuracy))
    for item_id, (answers, right) in tally.items():
        bind.execute(
            sa.update(items)
            .where(items.c.id == item_id)
            .values(gold_answers=answers, gold_right=right)
        )


def downgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.drop_column("gold_right")
        batch.drop_column("gold_answers")
