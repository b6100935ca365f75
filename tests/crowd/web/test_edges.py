"""The edge of every API: bodies we cannot take are 4xx naming where, outages are 503s.

The outage tests own their broken servers: a port nobody listens on, and a socket that
accepts connections and never answers (a frozen database or Redis), so they show the app
fails fast with Retry-After instead of hanging or answering a generic 500.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from flask.testing import FlaskClient

from crowd.app import create_app
from crowd.settings import Settings
from crowd.storage import MAX_ID
from crowd.web.bodies import MAX_DEPTH, MAX_INT
from tests.conftest import free_port

# A well-formed key: checking it needs the database.
UNKNOWN_KEY = {"Authorization": "Bearer crowd_000000000000_nope"}


def _webhooks(study_id: int) -> str:
    return f"/api/studies/{study_id}/webhooks"


def _post_raw(client: FlaskClient, path: str, text: str, auth: dict[str, str]) -> Any:
    return client.post(path, data=text.encode("utf-8", "surrogatepass"),
                       headers={**auth, "Content-Type": "application/json"})  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message", "field"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than", None),
        (
            '{"url": ' + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "}",
            "nested deeper",
            "url[0][0]",
        ),
        ('{"url": "https://example.org/\\ud800", "events": []}', "lone UTF-16 surrogate", "url"),
        ('{"url": "a\\u0000b"}', "NUL character", "url"),
        ('{"events": [1' + "0" * 400 + "]}", "out of range", "events[0]"),
        ('{"events": [1' + "0" * 5000 + "]}", "out of range", None),
        ('{"events": [NaN]}', "NaN is not a JSON number", None),
        ('{"events": [1e999]}', "too large for a 64-bit float", "events[0]"),
        ('{"url": ', "not valid JSON", None),
        ('{"\\udfff": 1}', "a key holds a lone UTF-16 surrogate", "\\udfff"),
    ],
)
def test_bodies_we_cannot_take_are_400s_naming_where(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int],
    text: str, message: str, field: str | None,
) -> None:  # fmt: skip
    reply = _post_raw(client, _webhooks(make_study()), text, auth)
    assert reply.status_code == 400, reply.get_data(as_text=True)[:300]
    body = reply.get_json()
    assert message in body["error"]
    # The field names the path to the fault (for deep nesting, its first steps are enough).
    assert (body.get("field") or "").startswith(field or "") and bool(body.get("field")) == bool(
        field
    )


def test_the_largest_stored_integer_passes_the_body_check(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int]
) -> None:
    reply = _post_raw(client, _webhooks(make_study()), f'{{"events": [{MAX_INT}]}}', auth)
    # Past the body check: the model refuses it as an event name, naming the field.
    assert reply.status_code == 422
    assert reply.get_json()["field"] in ("events[0]", "url")


def test_ids_beyond_the_stored_range_are_404s_on_every_method(
    client: FlaskClient, auth: dict[str, str]
) -> None:
    for study_id in (MAX_ID + 1, MAX_INT + 1, 10**19 - 1, 10**30):
        for method in ("get", "post"):
            reply = getattr(client, method)(f"/api/studies/{study_id}/webhooks", headers=auth)
            assert reply.status_code == 404, (study_id, method)
    assert client.get(f"/play/{10**400}").status_code == 404
    # The largest id is a valid id that does not exist (on PostgreSQL too).
    assert client.get(f"/api/studies/{MAX_ID}/webhooks", headers=auth).status_code == 404


def test_a_nul_in_the_url_is_a_400(client: FlaskClient, auth: dict[str, str]) -> None:
    for path in ("/api/studies?x=%00", "/v1/projects/a%00b", "/api/work/me?a%00=1"):
        reply = client.get(path, headers=auth)
        assert reply.status_code == 400, path
        assert "NUL" in reply.get_json()["error"]


def test_an_unknown_hit_type_is_a_422_naming_it(client: FlaskClient, auth: dict[str, str]) -> None:
    reply = client.post("/api/studies", json={"name": "x", "hit_type": "nope"}, headers=auth)
    assert reply.status_code == 422
    assert "unknown HIT type 'nope'" in reply.get_json()["error"]


# -- outages ---------------------------------------------------------------------------------
class Silent:
    """A TCP server that accepts connections and never says a word (a frozen server)."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.port = self.socket.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.socket.close()
        for connection in self.accepted:
            connection.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


def _assert_503(reply: Any, what: str) -> None:
    assert reply.status_code == 503, reply.get_data(as_text=True)[:300]
    assert int(reply.headers["Retry-After"]) > 0
    body = reply.get_json()
    assert body["type"] == "ServiceUnavailable"
    assert what in body["error"] and "retry" in body["error"]


@pytest.mark.parametrize("frozen", [False, True], ids=["refused", "frozen"])
def test_a_database_that_is_down_gives_503_with_retry_after(
    settings: Settings, silent: Silent, frozen: bool
) -> None:
    port = silent.port if frozen else free_port()
    broken = replace(settings, database_url=f"postgresql+psycopg://crowd@127.0.0.1:{port}/crowd")
    app = create_app(broken)
    started = time.monotonic()
    reply = app.test_client().get("/api/studies", headers=UNKNOWN_KEY)
    _assert_503(reply, "database")
    assert time.monotonic() - started < 30  # the connect timeout, not a hang
    scale = app.test_client().get("/v1/projects", headers=UNKNOWN_KEY)
    assert scale.status_code == 503 and scale.get_json()["status_code"] == 503
    app.extensions["crowd"].db.dispose()


@pytest.mark.parametrize("frozen", [False, True], ids=["refused", "frozen"])
def test_a_queue_that_is_down_gives_503_and_answers_still_count(
    settings: Settings, db: Any, api_key: str, make_study: Callable[..., int],
    silent: Silent, frozen: bool,
) -> None:  # fmt: skip
    study_id = make_study()
    port = silent.port if frozen else free_port()
    app = create_app(replace(settings, redis_url=f"redis://127.0.0.1:{port}/0"))
    client = app.test_client()
    auth = {"Authorization": f"Bearer {api_key}"}
    started = time.monotonic()
    # Asking the queue for a report needs the queue now: a 503, not a 500.
    _assert_503(client.post(f"/api/studies/{study_id}/report", headers=auth), "queue")
    assert time.monotonic() - started < 30
    # Storing answers does not: they wait in the outbox for the queue to come back.
    joined = client.post("/api/work/join", json={"name": "Ada"})
    assert joined.status_code == 201
    worker = {"X-Crowd-Worker": joined.get_json()["worker_token"]}
    shown = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=worker)
    assert shown.status_code == 200 and "assignment_id" in shown.get_json()
    app.extensions["crowd"].db.dispose()


def test_a_broken_schema_is_a_500_not_an_outage(app: Any) -> None:
    import sqlite3

    import sqlalchemy.exc

    from crowd.web import transient

    def refused(message: str) -> Exception:
        return sqlalchemy.exc.OperationalError("SELECT", {}, sqlite3.OperationalError(message))

    missing, locked = refused("no such table: x"), refused("database is locked")
    assert not transient(missing) and transient(locked)
