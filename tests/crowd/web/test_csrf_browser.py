"""Cross-site request forgery in headless Chromium: pages of another origin post to every
route that a cookie authenticates while the victim's browser holds that cookie, and nothing
happens.

The attacker's pages come from a second HTTP server, once on another site (127.0.0.2, where
SameSite=Lax keeps our cookies off its posts) and once on another port of our own host
(127.0.0.1, the same site to the browser: our cookies go with its posts, and it can even set
cookies for our host). They submit forms and send fetches to the dashboard's and the
reviewer's login, logout and action forms and to the worker API. Each is answered 403 with
the reason; the victim stays who they were, logged in or out, and no worker, assignment or
seat changes. The same forms posted from our own pages still work (the controls at the end
of each test, and the other browser tests).
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from sqlalchemy import func, select

from crowd.accounts import create_api_key
from crowd.storage import Assignment, AssignmentState, Database, TabooSeat, Worker, WorkerBlock
from tests.crowd.web.conftest import BROWSER_MARKS, open_and_join
from tests.crowd.web.review_pages import (
    EXPERIMENTER,
    OUTSIDER,
    PASSWORD,
    Reviewed,
    database_url_fixture,  # noqa: F401 (a fixture)
    db_state_fixture,  # noqa: F401 (a fixture)
    login,
    people_audit,
    played_fixture,  # noqa: F401 (a fixture)
    reviewed_fixture,  # noqa: F401 (a fixture)
)

pytestmark = BROWSER_MARKS
REFUSED = "refused: this request came from"


class AttackerSite:
    """Another origin's web server: it serves the pages (and cookies) each attack needs."""

    def __init__(self, host: str) -> None:
        pages: dict[str, tuple[str, list[str]]] = {}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
                body, cookies = pages.get(self.path, ("no such page", []))
                self.send_response(200 if self.path in pages else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                for cookie in cookies:
                    self.send_header("Set-Cookie", cookie)
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.pages = pages
        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.origin = f"http://{host}:{self.server.server_port}"

    def serve(self, body: str, cookies: list[str] | None = None) -> str:
        path = f"/attack/{len(self.pages)}"
        self.pages[path] = (f"<!doctype html><html><body>{body}</body></html>", cookies or [])
        return self.origin + path


@pytest.fixture(scope="module", params=["another-site", "same-host-other-port"])
def attacker(request: pytest.FixtureRequest) -> Iterator[AttackerSite]:
    site = AttackerSite("127.0.0.2" if request.param == "another-site" else "127.0.0.1")
    site.thread.start()
    yield site
    site.server.shutdown()
    site.thread.join()


def form(target: str, fields: dict[str, str], enctype: str = "") -> str:
    """A form that posts itself as soon as the page loads."""
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in fields.items()
    )
    kind = f' enctype="{enctype}"' if enctype else ""
    return (f'<form id="f" method="post" action="{html.escape(target)}"{kind}>{inputs}</form>'
            '<script>document.getElementById("f").submit()</script>')  # fmt: skip


def fetch(target: str, body: str | None = None) -> str:
    """A fetch a page of any origin may send without asking (no preflight), cookies included."""
    sent = "" if body is None else f", body: {json.dumps(body)}"
    return (f'<script>fetch({json.dumps(target)}, {{method: "POST", mode: "no-cors", '
            f'credentials: "include"{sent}}})</script>')  # fmt: skip


def attack(page: Any, attacker: AttackerSite, target: str, body: str,
           cookies: list[str] | None = None) -> Any:  # fmt: skip
    """Open the attacker's page in the victim's browser; the response to its post to target."""
    with page.expect_response(lambda r: r.url == target and r.request.method == "POST") as info:
        page.goto(attacker.serve(body, cookies))
    response = info.value
    assert response.status == 403, (target, response.status)
    if response.request.resource_type == "document":  # a form: the refusal is shown
        assert REFUSED in response.text() and attacker.origin in response.text()
        page.wait_for_load_state()
    return response


def own_form_token(base: str, path: str) -> tuple[str, str]:
    """What the attacker gets by opening our form himself: his session cookie and its token."""
    visit = requests.Session()
    page = visit.get(f"{base}{path}", timeout=10).text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return visit.cookies["session"], found[1]


def planted(cookie: str) -> list[str]:
    """The Set-Cookie that puts the attacker's session into the browser (for the host it is
    on: a page of our host at another port reaches our cookies, another site's does not)."""
    return [f"session={cookie}; Path=/; HttpOnly; SameSite=Lax"]


def dashboard_name(page: Any, base: str) -> str | None:
    """Whose dashboard the browser sees; None when it is sent to the login form."""
    page.goto(f"{base}/dashboard/")
    if urlsplit(page.url).path == "/dashboard/login":
        return None
    return str(page.inner_text("h1")).removeprefix("Studies of ")


def reviewer_name(page: Any, base: str) -> str | None:
    page.goto(f"{base}/review/")
    return None if page.url.endswith("/review/login") else str(page.inner_text("#who"))


# -- logging in and out ------------------------------------------------------------------------
def test_another_page_cannot_log_the_visitor_in_to_its_account(
    page: Any, attacker: AttackerSite, reviewed: Reviewed, db: Database
) -> None:
    base = reviewed.base
    with db.session() as session:
        attacker_key = create_api_key(session, "someone-else")  # OUTSIDER's experimenter
    # A login form filled with the attacker's key and a token valid for his own session,
    # whose cookie his page plants, then a bare one.
    cookie, token = own_form_token(base, "/dashboard/login")
    target = f"{base}/dashboard/login"
    attack(page, attacker, target, form(target, {"api_key": attacker_key, "csrf": token}),
           planted(cookie))  # fmt: skip
    attack(page, attacker, target, form(target, {"api_key": attacker_key}))
    assert dashboard_name(page, base) is None

    cookie, token = own_form_token(base, "/review/login")
    target = f"{base}/review/login"
    fields = {"name": OUTSIDER, "password": PASSWORD}
    attack(page, attacker, target, form(target, {**fields, "csrf": token}), planted(cookie))
    attack(page, attacker, target, form(target, fields))
    assert reviewer_name(page, base) is None

    # Control: that very form and token log the attacker in, from his own session.
    visit = requests.Session()
    visit.cookies.set("session", cookie)
    mine = visit.post(target, data={**fields, "csrf": token}, allow_redirects=False, timeout=10)
    assert mine.status_code == 302 and mine.headers["Location"].endswith("/review/")


def test_another_page_cannot_log_the_visitor_out(
    page: Any, attacker: AttackerSite, reviewed: Reviewed, api_key: str
) -> None:
    base = reviewed.base
    page.goto(f"{base}/dashboard/login")
    page.fill("input[name=api_key]", api_key)
    with page.expect_navigation():
        page.click("#login button[type=submit]")
    assert dashboard_name(page, base) == "tester"
    _cookie, token = own_form_token(base, "/dashboard/login")
    target = f"{base}/dashboard/logout"
    attack(page, attacker, target, form(target, {}))
    attack(page, attacker, target, form(target, {"csrf": token}))
    attack(page, attacker, target, fetch(target))
    assert dashboard_name(page, base) == "tester"

    assert login(page, base, EXPERIMENTER) == 200
    target = f"{base}/review/logout"
    attack(page, attacker, target, form(target, {"csrf": token}))
    attack(page, attacker, target, fetch(target))
    assert reviewer_name(page, base) == EXPERIMENTER

    # Control: the page's own logout button still logs out.
    page.goto(f"{base}/review/")
    with page.expect_navigation():
        page.click(".who form button")
    assert reviewer_name(page, base) is None


# -- the reviewer's actions --------------------------------------------------------------------
def test_another_page_cannot_act_on_workers_as_the_reviewer(
    page: Any, attacker: AttackerSite, reviewed: Reviewed, db: Database,
    db_state: Callable[[], dict[str, Any]],
) -> None:  # fmt: skip
    assert login(page, reviewed.base, EXPERIMENTER) == 200
    before = db_state()
    _cookie, token = own_form_token(reviewed.base, "/review/login")
    act_url = f"{reviewed.worker_url('sim-careful-00')}/act"
    block = {"action": "block", "reason": "forged"}
    attack(page, attacker, act_url, form(act_url, {**block, "csrf": token}))
    attack(page, attacker, act_url, form(act_url, block))
    attack(page, attacker, act_url, fetch(act_url, "action=bonus&amount=5.00&reason=x"))
    bulk_url = reviewed.url("/bulk")
    bulk = {"rule": "attention_failed", "action": "reject", "reason": "forged"}
    attack(page, attacker, bulk_url, form(bulk_url, {**bulk, "csrf": token}))
    attack(page, attacker, bulk_url, fetch(bulk_url, "rule=attention_failed&action=reject"))
    assert db_state() == before
    assert people_audit(db, reviewed.study_id) == []
    assert reviewer_name(page, reviewed.base) == EXPERIMENTER

    # Control: the same block, posted by the worker page itself with its token, blocks.
    page.goto(reviewed.worker_url("sim-careful-00"))
    with page.expect_navigation():
        page.evaluate("""fields => {
            const f = document.querySelector('#act');
            for (const [name, value] of Object.entries(fields)) { f.elements[name].value = value; }
            f.submit();
        }""", block)  # fmt: skip
    # A block asks first, on a page of its own; confirming it there blocks.
    with page.expect_navigation():
        page.click("#confirm button[type=submit]")
    assert page.inner_text("#status") == "blocked"
    with db.session() as session:
        blocked = session.scalars(select(WorkerBlock.worker_id)).all()
        assert blocked == [reviewed.workers["sim-careful-00"]]


# -- the worker's API --------------------------------------------------------------------------
def worker_id_seen(page: Any, base: str) -> int:
    """The worker the browser's cookie names, as our own page's script would ask."""
    page.goto(f"{base}/play")
    me: dict[str, Any] = page.evaluate("() => fetch('/api/work/me').then(r => r.json())")
    return int(me["worker_id"])


def assignments_of(db: Database, worker_id: int) -> list[tuple[Any, ...]]:
    """Everything a worker's step, return or next changes in their assignments."""
    with db.session() as session:
        query = select(Assignment.id, Assignment.state, Assignment.progress, Assignment.events,
                       Assignment.updated_at).where(Assignment.worker_id == worker_id)  # fmt: skip
        return [tuple(row) for row in session.execute(query.order_by(Assignment.id))]


def test_another_page_cannot_play_as_the_visitors_worker(
    page: Any, attacker: AttackerSite, live_server: Any, make_study: Callable[..., int],
    db: Database,
) -> None:  # fmt: skip
    base = live_server.url
    study = make_study(providers=("local",))
    taboo = make_study([{"id": "w1", "word": "banana"}], {"taboo": {"judge": None}},
                       providers=("local",), hit_type="taboo")  # fmt: skip
    open_and_join(page, base, study, "victim")  # the worker cookie, and an open assignment
    me = worker_id_seen(page, base)
    before = assignments_of(db, me)
    assert [row[1] for row in before] == [AssignmentState.ASSIGNED]
    assignment = before[0][0]
    with db.session() as session:
        workers = session.scalar(select(func.count(Worker.id)))

    api = f"{base}/api/work"
    back = f"{api}/assignments/{assignment}/return"
    step = f"{api}/assignments/{assignment}/step"
    attack(page, attacker, back, form(back, {}))
    attack(page, attacker, back, fetch(back))
    # A text/plain form can carry a JSON-looking body; the origin is refused before it.
    attack(page, attacker, step, form(step, {'{"action": "next", "x": "': '"}'}, "text/plain"))
    attack(page, attacker, step, fetch(step, json.dumps({"action": "next"})))
    attack(page, attacker, f"{api}/studies/{study}/next", fetch(f"{api}/studies/{study}/next"))
    lobby = f"{base}/api/taboo/studies/{taboo}/lobby"
    attack(page, attacker, lobby, fetch(lobby))
    attack(page, attacker, f"{api}/join", form(f"{api}/join", {"name": "attacker"}))

    assert worker_id_seen(page, base) == me  # the cookie was not replaced by a new worker
    assert assignments_of(db, me) == before
    with db.session() as session:
        assert session.scalar(select(func.count(TabooSeat.id))) == 0
        assert session.scalar(select(func.count(Worker.id))) == workers

    # Control: our own page makes that very bodiless post, and it gives the assignment back.
    page.goto(f"{base}/play/{study}")
    status = page.evaluate("url => fetch(url, {method: 'POST'}).then(r => r.status)", back)
    assert status == 200
    assert assignments_of(db, me)[0][1] == AssignmentState.RETURNED


def test_our_page_in_another_sites_frame_still_posts(
    page: Any, attacker: AttackerSite, live_server: Any, make_study: Callable[..., int]
) -> None:
    """What MTurk does: its page frames ours, whose calls are then same-origin and carry the
    worker token in a header (a cookie of a frame of another site is dropped)."""
    base = live_server.url
    study = make_study(providers=("local",))
    joined = requests.post(f"{base}/api/work/join", json={"provider": "local"}, timeout=10)
    token = joined.json()["worker_token"]
    page.goto(attacker.serve(f'<iframe src="{base}/play" width="800" height="600"></iframe>'))
    frame = page.frame(url=f"{base}/play")
    assert frame is not None
    frame.wait_for_load_state()
    view = frame.evaluate(
        """([url, token]) => fetch(url, {method: "POST", body: "{}", headers: {
            "Content-Type": "application/json", "X-Crowd-Worker": token}})
            .then(async r => ({status: r.status, body: await r.json()}))""",
        [f"/api/work/studies/{study}/next", token],
    )
    assert view["status"] == 200 and view["body"]["state"] == "assigned", view
