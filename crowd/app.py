"""The Flask application factory: wires storage, the queue and the web blueprints.

The composition root of the web process: nothing below it imports it.
"""

from __future__ import annotations

import logging

from flask import Flask

from crowd.context import make_platform
from crowd.settings import Settings

log = logging.getLogger(__name__)


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

