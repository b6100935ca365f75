"""The Flask application factory: wires storage, the queue and the web blueprints."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import redis
from flask import Flask, current_app

from crowd.security import WorkerSigner
from crowd.settings import Settings
from crowd.storage import Database

log = logging.getLogger(__name__)


@dataclass
class Platform:
    """The subsystems one app (or CLI command) works with."""

    settings: Settings
    db: Database
    redis: redis.Redis | None
    signer: WorkerSigner


def redis_connection(url: str) -> redis.Redis:
    # Short timeouts: a request must not hang on a dead Redis; the outbox catches up later.
    return redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)


def make_platform(settings: Settings) -> Platform:
    from crowd.queue.outbox import install_after_commit_enqueue

    db = Database(settings.database_url)
    connection = redis_connection(settings.redis_url) if settings.redis_url else None
    if connection is not None:
        install_after_commit_enqueue(db, connection)
    return Platform(settings, db, connection, WorkerSigner(settings.secret_key))


def create_app(settings: Settings | None = None) -> Flask:
    """Build the web app; `settings` default to the CROWD_* environment."""
    from crowd.web import init_app
    from tasks import load_builtin

    settings = settings or Settings.from_env()
    load_builtin()
    app = Flask(__name__, template_folder="web/templates", static_folder="web/static")
    app.config.update(
        SECRET_KEY=settings.secret_key,
        TESTING=settings.testing,
        MAX_CONTENT_LENGTH=64 * 1024 * 1024,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        JSON_SORT_KEYS=False,
    )
    platform = make_platform(settings)
    app.extensions["crowd"] = platform
    if platform.redis is None:
        log.warning("no CROWD_REDIS_URL: responses wait in the outbox until a worker sweeps")
    init_app(app)
    return app


def platform() -> Platform:
    """The platform of the current app."""
    value: Any = current_app.extensions["crowd"]
    return value
