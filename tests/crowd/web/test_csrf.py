"""CSRF rules through the Flask client (crowd.web.csrf): the form token of the dashboard's and
the reviewer's forms, and the origin check of every unsafe request. What a real browser does
with the same attacks from another site is in test_csrf_browser.py."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from crowd.accounts import create_user
from crowd.storage import Database
from crowd.web import csrf
from tests.conftest import join, log_in_to_dashboard

CROSS_SITE = {"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"}
REFUSED = "refused: this request came from"
PASSWORD = "correct-horse-battery"


def token_of(client: FlaskClient, path: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', client.get(path).get_data(as_text=True))
    assert found is not None, f"{path} has no form with a CSRF token"
    return found[1]


def unsafe_routes(app: Flask) -> list[tuple[str, str]]:
    """(method, a URL) of every rule that takes POST, PUT, PATCH or DELETE."""
    found = []
    for rule in app.url_map.iter_rules():
        for method in sorted(rule.methods - csrf.SAFE_METHODS):  # type: ignore[operator]
            found.append((method, re.sub(r"<(?:int:)?[^>]+>", "1", rule.rule)))
    return found


def test_every_unsafe_route_refuses_what_a_browser_says_another_site_sent(
    app: Flask, client: FlaskClient, auth: dict[str, str]
) -> None:
    routes = unsafe_routes(app)
    # The forms, the worker API and the API-key API alike; a new route is covered by itself.
    for expected in ("/dashboard/login", "/dashboard/logout", "/review/logout",
                     "/api/work/assignments/1/return", "/api/taboo/games/1/leave",
                     "/api/studies/1/webhooks/1", "/v1/projects"):  # fmt: skip
        assert expected in {url for _method, url in routes}, expected
    join(client, name="victim")  # the worker cookie, which the browser would attach
    for method, url in routes:
        # The APIs as their clients call them, the forms as browsers post them.
        sent: dict[str, Any] = {"json": {}} if url.startswith(("/api/", "/v1/")) else {"data": {}}
        # A malformed Origin is refused like any other, never a 500.
        for headers in (CROSS_SITE, {"Sec-Fetch-Site": "same-site"}, {"Origin": "null"},
                        {"Origin": "http://localhost.evil.example"}, {"Origin": "http://[::1"},
                        {"Origin": "http://localhost:http"},
                        {"Origin": "http://localhost/path"}):  # fmt: skip
            reply = client.open(url, method=method, headers={**headers, **auth}, **sent)
            assert reply.status_code == 403, (method, url, headers, reply.status_code)
            body = reply.get_json(silent=True)
            if url.startswith(("/api/", "/v1/")):
                assert body is not None and REFUSED in body["error"], (url, body)
            else:
                assert body is None and REFUSED in reply.get_data(as_text=True)
        # Our own pages (the default port written or not), and clients that are not browsers,
        # pass this check; the forms carry the token their page gives.
        for headers in (SAME_ORIGIN, {"Sec-Fetch-Site": "none"}, {"Origin": "http://localhost"},
                        {"Origin": "http://localhost:80"}, {}):  # fmt: skip
            if "data" in sent:
                sent = {"data": {"csrf": token_of(client, "/dashboard/login")}}
            reply = client.open(url, method=method, headers={**headers, **auth}, **sent)
            status = reply.status_code
            assert status != 403 and status < 500, (method, url, headers, status)


def test_the_origin_of_crowd_base_url_is_ours_too(client: FlaskClient, app: Flask) -> None:
    base = app.extensions["crowd"].settings.base_url
    ours = client.post("/api/work/join", json={}, headers={"Origin": base})
    assert ours.status_code == 201
    other = client.post("/api/work/join", json={}, headers={"Origin": "http://127.0.0.2:5000"})
    assert other.status_code == 403 and REFUSED in other.get_json()["error"]


def test_an_origin_is_ours_whether_or_not_it_writes_its_default_port(
    client: FlaskClient,
) -> None:
    def status(host: str, origin: str, scheme: str = "http") -> int:
        # The scheme the request reached us by: http where a proxy ended TLS.
        reply = client.post("/api/work/join", json={}, base_url=f"{scheme}://{host}",
                            headers={"Host": host, "Origin": origin})  # fmt: skip
        return reply.status_code

    # A proxy that ended TLS may pass on the port the browser left out, and a browser may
    # write it.
    assert status("example.com:443", "https://example.com") == 201
    assert status("example.com:80", "http://example.com") == 201
    assert status("example.com", "https://example.com:443") == 201
    assert status("EXAMPLE.com:443", "https://example.COM") == 201
    assert status("[::1]:443", "https://[::1]") == 201
    assert status("example.com:8443", "https://example.com:8443") == 201
    # Another port is another origin.
    assert status("example.com:80", "https://example.com", scheme="https") == 403
    assert status("example.com:443", "http://example.com") == 403
    assert status("example.com:8443", "https://example.com") == 403
    assert status("example.com", "https://example.com:8443") == 403
    assert status("[::1]:443", "https://[::2]") == 403


def test_the_worker_api_takes_json_only_and_its_pages_still_post(
    client: FlaskClient, make_study: Any
) -> None:
    study_id = make_study(providers=("local",))
    join(client, name="ada")  # the cookie only: the pages of the open web use it
    view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=SAME_ORIGIN)
    assert view.status_code == 200, view.get_json()
    step = f"/api/work/assignments/{view.get_json()['assignment_id']}/step"
    # What a form with enctype=text/plain sends: refused before it is read.
    plain = client.post(step, data='{"action": "next"}', content_type="text/plain",
                        headers=SAME_ORIGIN)  # fmt: skip
    assert plain.status_code == 415
    back = client.post(f"/api/work/assignments/{view.get_json()['assignment_id']}/return",
                       headers=SAME_ORIGIN)  # fmt: skip
    assert back.status_code == 200 and back.get_json()["state"] == "returned"


def test_the_dashboard_forms_need_their_token(
    client: FlaskClient, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No token, a forged one, a non-ASCII one, and one signed for another browser's session.
    other = token_of(client.application.test_client(), "/dashboard/login")
    for form, message in (({}, "has no security token"),
                          ({"csrf": "x" * 43}, "not valid"),
                          ({"csrf": "ü" * 80}, "not valid"),
                          ({"csrf": other}, "made for another session")):  # fmt: skip
        token_of(client, "/dashboard/login")  # the page sets the pre-session cookie
        reply = client.post("/dashboard/login", data={"api_key": api_key, **form})
        page = reply.get_data(as_text=True)
        assert reply.status_code == 403 and message in page and "reload the page" in page, form
        assert client.get("/dashboard/").status_code == 302  # still logged out
    fresh = client.application.test_client()
    no_session = fresh.post("/dashboard/login", data={"api_key": api_key, "csrf": other})
    assert no_session.status_code == 403
    assert "without the session it was made for" in no_session.get_data(as_text=True)

    assert log_in_to_dashboard(client, api_key).status_code == 302
    assert client.get("/dashboard/").status_code == 200
    token = token_of(client, "/dashboard/")
    assert client.post("/dashboard/logout").status_code == 403
    assert client.get("/dashboard/").status_code == 200  # still logged in
    monkeypatch.setattr(csrf, "MAX_AGE_SECONDS", -1)
    expired = client.post("/dashboard/logout", data={"csrf": token})
    assert expired.status_code == 403 and "more than a day old" in expired.get_data(as_text=True)
    monkeypatch.undo()
    assert client.post("/dashboard/logout", data={"csrf": token}).status_code == 302
    assert client.get("/dashboard/").status_code == 302


def test_a_login_gives_a_new_token(client: FlaskClient, api_key: str, db: Database) -> None:
    before = token_of(client, "/review/login")
    with db.session() as session:
        create_user(session, "tester", "erin", "experimenter", PASSWORD)
    form = {"name": "erin", "password": PASSWORD, "csrf": before}
    assert client.post("/review/login", data=form).status_code == 302
    # The login page's token dies with the pre-session: it cannot log the person out.
    assert client.post("/review/logout", data={"csrf": before}).status_code == 403
    assert client.get("/review/").status_code == 200
    current = token_of(client, "/review/")
    assert client.post("/review/logout", data={"csrf": current}).status_code == 302
    assert client.get("/review/").status_code == 302
