"""deliveries and webhook subscriptions

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 13:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import crowd.storage.base

from sqlalchemy.dialects import postgresql
revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    op.create_table('webhook_subscriptions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('url', sa.String(length=2000), nullable=False),
    sa.Column('events', JSON, nullable=False),
    sa.Column('secret', sa.String(length=200), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('created_at', crowd.storage.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], name=op.f('fk_webhook_subscriptions_study_id_studies')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_subscriptions'))
    )
    with op.batch_alter_table('webhook_subscriptions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_subscriptions_study_id'), ['study_id'], unique=False)

    op.create_table('deliveries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=50), nullable=False),
    sa.Column('url', sa.String(length=2000), nullable=False),
    sa.Column('payload', JSON, nullable=False),
    sa.Column('headers', JSON, nullable=False),
    sa.Column('ref', sa.String(length=200), nullable=True),
    sa.Column('secret', sa.String(length=200), nullable=True),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('last_status_code', sa.Integer(), nullable=True),
    sa.Column('next_attempt_at', crowd.storage.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('created_at', crowd.storage.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('delivered_at', crowd.storage.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('subscription_id', sa.Integer(), nullable=True),
    sa.Column('event', sa.String(length=100), nullable=True),
    sa.ForeignKeyConstraint(['subscription_id'], ['webhook_subscriptions.id'], name=op.f('fk_deliveries_subscription_id_webhook_subscriptions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deliveries')),
    sa.UniqueConstraint('subscription_id', 'event', 'ref', name=op.f('uq_deliveries_subscription_id_event_ref'))
    )
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.create_index('ix_deliveries_due', ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_deliveries_ref'), ['ref'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_deliveries_ref'))
        batch_op.drop_index('ix_deliveries_due')

    op.drop_table('deliveries')
    with op.batch_alter_table('webhook_subscriptions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_subscriptions_study_id'))

    op.drop_table('webhook_subscriptions')
