"""Fixtures: settings, a fresh database per test (SQLite, or PostgreSQL when
CROWD_TEST_DATABASE_URL is set), an empty Redis database (the machine's when
CROWD_TEST_REDIS_URL is set, else an embedded one), the app, clients and study factories."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from click.testing import CliRunner
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import create_engine, make_url, text

from crowd.accounts import authenticate, create_api_key
from crowd.app import create_app
from crowd.demo import BackgroundServer, sample_records
from crowd.platforms.publishing import open_study
from crowd.queue.embedded import EmbeddedRedis
from crowd.settings import Settings
from crowd.storage import Database, Study
from crowd.studies.lifecycle import create_study, import_items

SECRET = "test-secret-key-that-is-long-enough-to-sign-tokens"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker process gets a PostgreSQL database and a Redis database
    of its own (test_gw0, test_gw1, ... beside CROWD_TEST_DATABASE_URL's; Redis databases
    counted down from CROWD_TEST_REDIS_URL's), so tests that reset them never meet."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    n = int(worker.removeprefix("gw"))
    url = os.environ.get("CROWD_TEST_DATABASE_URL")
    if url and url.startswith("postgresql"):
        base = make_url(url)
        name = f"{base.database}_{worker}"
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            exists = connection.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ).first()
            if not exists:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        os.environ["CROWD_TEST_DATABASE_URL"] = base.set(database=name).render_as_string(
            hide_password=False
        )
    redis_url = os.environ.get("CROWD_TEST_REDIS_URL")
    if redis_url:
        parsed = urlsplit(redis_url)
        number = int(parsed.path.strip("/") or 0) - n
        if number < 0:
            raise pytest.UsageError(f"CROWD_TEST_REDIS_URL's database leaves no room for {worker}")
        os.environ["CROWD_TEST_REDIS_URL"] = urlunsplit(parsed._replace(path=f"/{number}"))


def free_port() -> int:
    """A local TCP port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("CROWD_TEST_REDIS_URL")
    if url:
        yield url
        return
    embedded = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    with embedded:
        yield embedded.url


@pytest.fixture
def redis_url(redis_server: str) -> Iterator[str]:
    connection = redis.Redis.from_url(redis_server)
    connection.flushdb()
    yield redis_server
    connection.flushdb()
    connection.close()


def _reset_postgres(url: str) -> None:
    db = Database(url)
    with db.engine.begin() as connection:
        connection.execute(text("DROP SCHEMA public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    db.dispose()


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    url = os.environ.get("CROWD_TEST_DATABASE_URL")
    if url:
        _reset_postgres(url)
        return url
    return f"sqlite:///{tmp_path / 'crowd.db'}"


@pytest.fixture
def settings(tmp_path: Path, database_url: str, redis_url: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        secret_key=SECRET,
        redis_url=redis_url,
        testing=True,
        # Tests receive webhooks and callbacks on 127.0.0.1.
        delivery_allow_private=True,
        # Jobs of one study's answers run back to back; the pacing has tests of its own.
        qc_refresh_interval=0.0,
    )


@pytest.fixture
def db(settings: Settings) -> Iterator[Database]:
    database = Database(settings.database_url)
    database.upgrade()
    yield database
    database.dispose()


@pytest.fixture
def app(settings: Settings, db: Database) -> Iterator[Flask]:
    application = create_app(settings)
    yield application
    application.extensions["crowd"].db.dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def runner(settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("CROWD_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("CROWD_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("CROWD_SECRET_KEY", SECRET)
    monkeypatch.setenv("CROWD_REDIS_URL", settings.redis_url or "")
    return CliRunner()


@pytest.fixture
def api_key(db: Database) -> str:
    with db.session() as session:
        return create_api_key(session, "tester")


@pytest.fixture
def auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def passage(
    item_id: str, boundary: int, n: int = 5, kind: str = "real", **extra: Any
) -> dict[str, Any]:
    """A small passage whose sentences say their own index (handy for leak checks)."""
    return {
        "id": item_id,
        "kind": kind,
        "sentences": [f"{item_id} sentence number {i} of the passage." for i in range(n)],
        "boundary": boundary,
        **extra,
    }


@pytest.fixture
def make_study(db: Database, api_key: str) -> Callable[..., int]:
    """Create, fill and publish a study (boundary unless `hit_type` says); returns its id."""

    def factory(
        items: list[dict[str, Any]] | None = None,
        config: dict[str, Any] | None = None,
        providers: tuple[str, ...] = ("local", "sim"),
        hit_type: str = "boundary",
    ) -> int:
        records = items if items is not None else [passage(f"p{i}", 1 + i % 5) for i in range(6)]
        with db.session() as session:
            experimenter = authenticate(session, api_key)
            study: Study = create_study(
                session,
                experimenter,
                "test study",
                hit_type,
                config
                if config is not None
                else {"annotations_per_item": 2, "attention_rate": 0.0},
            )
            import_items(session, study, json.loads(json.dumps(records)))
            open_study(session, study, providers)
            return study.id

    return factory


@pytest.fixture
def sample_items() -> list[dict[str, Any]]:
    return sample_records()


@pytest.fixture
def live_server(settings: Settings, db: Database) -> Iterator[BackgroundServer]:
    with BackgroundServer(settings) as server:
        yield server


def join(
    client: FlaskClient,
    auth: dict[str, str] | None = None,
    name: str | None = None,
    external_id: str = "w1",
) -> dict[str, str]:
    """Join as a worker; returns the header that carries the worker token."""
    if auth is not None:
        body = {"provider": "sim", "external_id": external_id}
        response = client.post("/api/work/join", json=body, headers=auth)
    else:
        response = client.post("/api/work/join", json={"provider": "local", "name": name})
    assert response.status_code == 201, response.get_json()
    return {"X-Crowd-Worker": response.get_json()["worker_token"]}


def log_in_to_dashboard(client: FlaskClient, api_key: str) -> Any:
    """Post the dashboard's login form as a browser does: with the token its page carries."""
    page = client.get("/dashboard/login").get_data(as_text=True)
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None, "the login form carries no CSRF token"
    return client.post("/dashboard/login", data={"api_key": api_key, "csrf": token[1]})
