"""Request helpers shared by the blueprints: JSON bodies and who is asking."""

from __future__ import annotations

from typing import Any

from flask import request
from sqlalchemy.orm import Session

from crowd.accounts import authenticate
from crowd.context import platform
from crowd.exceptions import AuthenticationError, ValidationError
from crowd.storage import Experimenter
from crowd.web.contract import WORKER_COOKIE, WORKER_HEADER


def json_body() -> dict[str, Any]:
    """The request's JSON object; forms are refused, which also keeps cross-site posts out."""
    if not request.is_json:
        raise ValidationError("send a JSON body with Content-Type: application/json")
    body = request.get_json(silent=True)
    if body is None:
        body = {} if not request.get_data() else None
    if not isinstance(body, dict):
        raise ValidationError("the request body must be a JSON object")
    return body


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header[len("Bearer ") :].strip()
    return None


def current_experimenter(session: Session) -> Experimenter:
    """The experimenter of the request's API key (Authorization: Bearer <key>)."""
    token = bearer_token()
    if not token:
        raise AuthenticationError("send your API key as 'Authorization: Bearer <key>'")
    return authenticate(session, token)


def current_worker_id() -> int:
    """The worker id signed into the request's header or cookie."""
    token = request.headers.get(WORKER_HEADER) or request.cookies.get(WORKER_COOKIE)
    if not token:
        raise AuthenticationError("join first: POST /api/work/join gives you a worker token")
    return platform().signer.verify(token)


def current_worker() -> tuple[int, int | None]:
    """The worker id and, on a crowd platform's page, the platform session id."""
    token = request.headers.get(WORKER_HEADER) or request.cookies.get(WORKER_COOKIE)
    if not token:
        raise AuthenticationError("join first: POST /api/work/join gives you a worker token")
    return platform().signer.claims(token)


def optional_worker_id() -> int | None:
    try:
        return current_worker_id()
    except AuthenticationError:
        return None
