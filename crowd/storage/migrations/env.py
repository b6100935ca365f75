"""Alembic environment: runs migrations on the engine handed over by crowd.storage.db."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from crowd.storage import Base

config = context.config
engine = config.attributes.get("engine") or create_engine(
    str(config.get_main_option("sqlalchemy.url"))
)

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
