"""Alembic environment: runs migrations on the engine handed over by crowd.storage.db.

On SQLite a batch migration rebuilds a table (copy, drop, rename): with foreign keys on, as
crowd.storage.db turns them on for every connection, dropping `items` once `responses` refer
to it fails, so a downgrade that drops a column failed on any database with answers. The keys
are off while the migrations run (a PRAGMA that has to come before the transaction: inside one
SQLite ignores it), every reference is checked after them, and the keys are on again before
the connection goes back to the pool.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import create_engine

from crowd.storage import Base

config = context.config
engine = config.attributes.get("engine") or create_engine(
    str(config.get_main_option("sqlalchemy.url"))
)


def _pragma(connection: Any, statement: str) -> None:
    """A PRAGMA on the driver's connection itself, outside any transaction."""
    connection.connection.dbapi_connection.execute(statement).close()


with engine.connect() as connection:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        _pragma(connection, "PRAGMA foreign_keys=OFF")
    try:
        context.configure(
            connection=connection, target_metadata=Base.metadata, render_as_batch=sqlite
        )
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"a migration left references broken: {broken[:5]}")
        connection.commit()
    finally:
        if sqlite:
            _pragma(connection, "PRAGMA foreign_keys=ON")
