"""The platform a request, a command or a job works with: settings, database, Redis, signer.

`make_platform` builds one (the app factory and the CLI call it); `platform()` is the current
app's, for the web blueprints. Kept apart from crowd.app so that the blueprints, which need
`platform()`, do not import the app factory that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis
from flask import current_app

from crowd.plugins import load_features
from crowd.queue import quick_connection, redis_connection
from crowd.queue.outbox import install_after_commit_enqueue
from crowd.security import WorkerSigner
from crowd.settings import Settings
from crowd.storage import Database


@dataclass
class Platform:
    """The subsystems one app (or CLI command) works with."""

    settings: Settings
    db: Database
    redis: redis.Redis | None
    signer: WorkerSigner


def make_platform(settings: Settings) -> Platform:
    """The platform for `settings`, its commits enqueueing their outbox events."""
    # The features register the hooks their commits need (e.g. deliveries) on import.
    load_features()
    db = Database(settings.database_url)
    connection = redis_connection(settings.redis_url) if settings.redis_url else None
    if settings.redis_url:
        # Requests never wait long on a sick Redis: the outbox keeps what it did not take.
        install_after_commit_enqueue(db, quick_connection(settings.redis_url))
    return Platform(settings, db, connection, WorkerSigner(settings.secret_key))


def platform() -> Platform:
    """The platform of the current app."""
    value: Any = current_app.extensions["crowd"]
    return value
