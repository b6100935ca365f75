"""The engine, sessions and schema upgrades for SQLite (WAL) and PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS = Path(__file__).with_name("migrations")
READ_ONLY = "crowd_read_only"
CONNECT_TIMEOUT = 5  # seconds
# A number of 19 digits or more may lie outside 64 bits, where orjson turns it into a float.
_LONG_NUMBER = re.compile(r"\d{19,}")
_LONG_NUMBER_BYTES = re.compile(rb"\d{19,}")


def load_json(text: str | bytes | memoryview) -> Any:
    """A stored JSON value, decoded with orjson (a QC refresh reads every answer and QC flag
    of a study, and the standard library's decoder was 40% of its time at 18,000 answers on
    PostgreSQL), and with the standard library's where orjson would differ: a number beyond
    64 bits (orjson rounds it to a float) and what json.dumps writes and orjson refuses
    (NaN, Infinity, an unpaired surrogate)."""
    if isinstance(text, memoryview):
        text = bytes(text)
    pattern = _LONG_NUMBER if isinstance(text, str) else _LONG_NUMBER_BYTES
    if pattern.search(text) is None:  # type: ignore[arg-type]
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when transactions begin (see on_begin).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Any) -> None:
        # IMMEDIATE takes the write lock up front: two deferred transactions that both
        # read and then write would otherwise fail with "database is locked" instead of
        # waiting their turn, and assignment must be serialized anyway. Read-only sessions
        # (long analyses) begin deferred: in WAL mode they read a snapshot and block nobody.
        if connection.get_execution_options().get(READ_ONLY):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")


class Database:
    """Owns the engine and hands out sessions; one per app or CLI process."""

    def __init__(self, url: str, echo: bool = False) -> None:
        self.url = url
        # JSON is written with json.dumps still (orjson refuses what it takes, int keys).
        kwargs: dict[str, Any] = {"echo": echo, "json_deserializer": load_json}
        if url.startswith("sqlite"):
            path = url.split("///", 1)[-1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            # A database that does not answer must not hang requests: they fail fast and
            # the web layer answers 503 with Retry-After.
            kwargs.update(pool_pre_ping=True, pool_size=10, max_overflow=20, pool_timeout=10,
                          connect_args={"connect_timeout": CONNECT_TIMEOUT})  # fmt: skip
        self.engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            _configure_sqlite(self.engine)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.read_sessions = sessionmaker(
            self.engine.execution_options(**{READ_ONLY: True}), expire_on_commit=False
        )

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in a transaction: committed on success, rolled back on error."""
        with self.sessions() as session, session.begin():
            yield session

    @contextmanager
    def read_session(self) -> Iterator[Session]:
        """A session for reading only; on SQLite it takes no write lock (never write in it)."""
        with self.read_sessions() as session:
            try:
                yield session
            finally:
                session.rollback()

    def upgrade(self, revision: str = "head") -> None:
        """Bring the schema up to `revision` with Alembic."""
        from alembic import command

        command.upgrade(self.alembic_config(), revision)

    def downgrade(self, revision: str = "base") -> None:
        from alembic import command

        command.downgrade(self.alembic_config(), revision)

    def alembic_config(self) -> Any:
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.set_main_option("sqlalchemy.url", self.url.replace("%", "%%"))
        config.attributes["engine"] = self.engine
        return config

    def dispose(self) -> None:
        self.engine.dispose()
