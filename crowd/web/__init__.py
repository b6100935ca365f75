"""Web blueprints: experimenter API, worker pages and API, the game, the dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from flask import Flask, Response, jsonify, render_template, request, send_from_directory
from werkzeug.exceptions import HTTPException

from crowd.exceptions import CrowdError
from tasks import HIT_TYPES

TASKS_ROOT = Path(__file__).resolve().parents[2] / "tasks"


def _wants_json() -> bool:
    return request.path.startswith(("/api/", "/v1/")) or request.is_json


def init_app(app: Flask) -> None:
    from crowd.web import api, dashboard, game, openapi, review, webhooks, work

    # Each HIT type's templates are found as "<type>/<file>" (tasks/<type>/templates/<file>).
    prefixes: dict[str, jinja2.BaseLoader] = {
        name: jinja2.FileSystemLoader(str(TASKS_ROOT / name / "templates")) for name in HIT_TYPES
    }
    app.jinja_loader = jinja2.ChoiceLoader(
        [jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))),
         jinja2.PrefixLoader(prefixes)]
    )  # fmt: skip

    for blueprint in (api.bp, work.bp, game.bp, dashboard.bp, review.bp, openapi.bp):
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
            return jsonify(error=str(error), type=type(error).__name__), error.status
        return render_template("error.html", message=str(error)), error.status

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> Any:
        if _wants_json():
            return jsonify(error=error.description, type=error.name), error.code
        return render_template("error.html", message=error.description), error.code

    @app.after_request
    def security_headers(response: Response) -> Response:
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        if request.path.startswith(("/api/work/", "/api/taboo/")):
            # Answers and sentences must not linger in shared caches.
            response.headers["Cache-Control"] = "no-store"
        return response
