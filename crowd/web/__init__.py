"""Web blueprints: experimenter API, worker pages and API, the game, the dashboard."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import jinja2
import redis
import sqlalchemy.exc
from flask import Flask, Response, jsonify, render_template, request, send_from_directory
from werkzeug.exceptions import BadRequest, HTTPException
from werkzeug.exceptions import NotFound as NotFoundError
from werkzeug.routing import IntegerConverter

from crowd.exceptions import CrowdError
from crowd.storage import MAX_ID
from crowd.web.bodies import CheckedJSONProvider
from tasks import HIT_TYPES

log = logging.getLogger(__name__)

TASKS_ROOT = Path(__file__).resolve().parents[2] / "tasks"


def _wants_json() -> bool:
    return request.path.startswith(("/api/", "/v1/")) or request.is_json


# A database or queue that is down or busy: the client should retry, nothing was done.
OUTAGES: tuple[type[Exception], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,
    redis.ConnectionError,
    redis.TimeoutError,
)
RETRY_AFTER_SECONDS = 5


class IdConverter(IntegerConverter):
    """`<int:...>` ids: 0 to MAX_ID (what the database stores); anything larger is a 404."""

    regex = r"\d{1,19}"

    def __init__(self, map: Any, fixed_digits: int = 0, min: int | None = 0,  # noqa: A002
                 max: int | None = MAX_ID, signed: bool = False) -> None:  # noqa: A002
        super().__init__(map, fixed_digits, min, max, signed)

    def to_python(self, value: str) -> Any:
        number = int(value)
        if number > MAX_ID:
            # Not werkzeug's ValidationError: with it, another method's rule on the same path
            # turns the miss into a 405.
            raise NotFoundError(f"no id is above {MAX_ID}")
        return number


# SQLite's operational errors that pass: a busy or locked file, or one it cannot reach now.
SQLITE_TRANSIENT = ("locked", "busy", "unable to open", "disk i/o")


def transient(error: Exception) -> bool:
    """Whether an error of OUTAGES is one a retry can get past (not, e.g., a missing table)."""
    if not isinstance(error, sqlalchemy.exc.DBAPIError) or error.connection_invalidated:
        return True
    if type(error.orig).__module__.startswith("sqlite3"):
        return any(word in str(error.orig).lower() for word in SQLITE_TRANSIENT)
    return True  # PostgreSQL's operational errors: connections lost, shutdowns, timeouts


def _error_json(error: CrowdError) -> dict[str, Any]:
    kind = getattr(error, "kind", None) or type(error).__name__
    body: dict[str, Any] = {"error": str(error), "type": kind}
    where = getattr(error, "where", None)
    if where:
        body["field"] = where
    problems = getattr(error, "problems", None)
    if problems:
        body["errors"] = [problem.model_dump() for problem in problems]
    return body


def init_app(app: Flask) -> None:
    from crowd.web import (
        api,
        csrf,
        dashboard,
        dashboard_study,  # noqa: F401 - its routes join dashboard.bp
        game,
        openapi,
        preview,
        review,
        webhooks,
        work,
    )

    app.json = CheckedJSONProvider(app)
    # First of the request hooks: a cross-origin post is refused before anything reads it.
    csrf.init_app(app)
    # Before any blueprint: rules bind their converters when they are added.
    app.url_map.converters["int"] = IdConverter

    # Each HIT type's templates are found as "<type>/<file>" (tasks/<type>/templates/<file>).
    prefixes: dict[str, jinja2.BaseLoader] = {
        name: jinja2.FileSystemLoader(str(TASKS_ROOT / name / "templates")) for name in HIT_TYPES
    }
    app.jinja_loader = jinja2.ChoiceLoader(
        [jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))),
         jinja2.PrefixLoader(prefixes)]
    )  # fmt: skip

    for blueprint in (api.bp, work.bp, game.bp, dashboard.bp, preview.bp, review.bp, openapi.bp):
        app.register_blueprint(blueprint)
    from crowd.web import external

    app.register_blueprint(external.bp)
    app.register_blueprint(webhooks.bp)
    from crowd.plugins import live_modules
    from crowd.web import scale

    app.register_blueprint(scale.bp)
    # HIT types played live bring their own blueprint (their live package's `blueprint`).
    for _hit_type, live in live_modules():
        if getattr(live, "blueprint", None) is not None:
            app.register_blueprint(live.blueprint)

    @app.get("/static/tasks/<hit_type>/<path:filename>")
    def task_static(hit_type: str, filename: str) -> Response:
        if hit_type not in HIT_TYPES:
            return Response("unknown HIT type", status=404)
        return send_from_directory(TASKS_ROOT / hit_type / "static", filename)

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"ok": True}

    @app.errorhandler(CrowdError)
    def crowd_error(error: CrowdError) -> Any:
        if _wants_json():
            return jsonify(_error_json(error)), error.status
        return render_template("error.html", message=str(error)), error.status

    @app.errorhandler(sqlalchemy.exc.DataError)
    def data_error(error: sqlalchemy.exc.DataError) -> Any:
        # Validation should have caught it; the database refusing a value is still the input's.
        log.warning("the database refused a value: %s", error.orig)
        message = "a value does not fit what the database stores (too long or out of range)"
        if _wants_json():
            return jsonify(error=message, type="ValidationError"), 422
        return render_template("error.html", message=message), 422

    def outage(error: Exception) -> Any:
        if not transient(error):
            raise error  # a broken deployment, not an outage: Flask's 500, logged
        log.error("outage answered with 503: %s: %s", type(error).__name__, error)
        what = "queue (Redis)" if isinstance(error, redis.RedisError) else "database"
        message = f"the {what} is unavailable: retry in a few seconds"
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
        if request.blueprint == "scale":
            body: dict[str, Any] = {"status_code": 503, "error": message,
                                    "type": "ServiceUnavailable"}  # fmt: skip
            return jsonify(body), 503, headers
        if _wants_json():
            return jsonify(error=message, type="ServiceUnavailable"), 503, headers
        return render_template("error.html", message=message), 503, headers

    for kind in OUTAGES:
        app.register_error_handler(kind, outage)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Any:
        if request.path.startswith("/v1/"):  # no /v1 route matched: still scaleapi's shape
            return scale.unrouted(error)
        if _wants_json():
            return jsonify(error=error.description, type=error.name), error.code
        return render_template("error.html", message=error.description), error.code

    @app.before_request
    def refuse_nul() -> None:
        # A NUL in a path or query value can reach no stored text (PostgreSQL refuses it).
        if "\x00" in request.path or any("\x00" in key + value
                                          for key, value in request.args.items(multi=True)):
            raise BadRequest("the URL holds a NUL character (%00): remove it")

    @app.after_request
    def security_headers(response: Response) -> Response:
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        if request.path.startswith("/api/work/"):
            # Answers and sentences must not linger in shared caches.
            response.headers["Cache-Control"] = "no-store"
        return response
