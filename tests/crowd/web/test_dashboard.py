"""The experimenter's web app over HTTP: its forms do what the API does, refuse what it
refuses (naming the field, storing nothing), and show only the experimenter's own studies."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from crowd.accounts import create_api_key
from crowd.storage import ApiKey, Assignment, Database, Item, OutboxEvent, Response, Study
from tests.conftest import log_in_to_dashboard

COMPARISON_CSV = (
    "id,query,candidates\n"
    "q1,Which reply is kindest?,Thanks a lot!|Go away.|Fine.|Whatever.\n"
    "q2,Which summary is right?,The cat sat.|The dog ran.|A bird sang.|Fish swam.\n"
)


def _token(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, "the page's form carries no CSRF token"
    return found[1]


class App:
    """A browser-like client of the dashboard: logged in, posting forms with their token."""

    def __init__(self, client: FlaskClient, key: str) -> None:
        self.client = client
        assert log_in_to_dashboard(client, key).status_code == 302

    def get(self, path: str) -> Any:
        return self.client.get(path)

    def post(self, page: str, action: str, data: dict[str, Any], **kwargs: Any) -> Any:
        token = _token(self.client.get(page).get_data(as_text=True))
        return self.client.post(action, data={"csrf": token, **data}, **kwargs)

    def create(self, **fields: Any) -> int:
        form = {"name": "My study", "hit_type": "comparison", **fields}
        reply = self.post("/dashboard/studies/new", "/dashboard/studies/new", form)
        assert reply.status_code == 302, reply.get_data(as_text=True)[:2000]
        return int(reply.location.rsplit("/", 1)[1])


@pytest.fixture
def app_client(client: FlaskClient, api_key: str) -> App:
    return App(client, api_key)


def _count(db: Database, model: Any, **where: Any) -> int:
    with db.session() as session:
        query = select(func.count()).select_from(model)
        for name, value in where.items():
            query = query.where(getattr(model, name) == value)
        return int(session.scalar(query) or 0)


def test_pages_need_a_login_and_come_back_after_it(client: FlaskClient, api_key: str) -> None:
    reply = client.get("/dashboard/keys")
    assert reply.status_code == 302
    assert reply.location.startswith("/dashboard/login?next=/dashboard/keys")
    page = client.get(reply.location).get_data(as_text=True)
    back = client.post(reply.location, data={"api_key": api_key, "csrf": _token(page)})
    assert back.location == "/dashboard/keys"
    # Never a redirect off the site, whatever `next` says.
    client.post("/dashboard/logout", data={"csrf": _token(client.get("/dashboard/keys").text)})
    page = client.get("/dashboard/login?next=//evil.example/").get_data(as_text=True)
    away = client.post(
        "/dashboard/login?next=//evil.example/", data={"api_key": api_key, "csrf": _token(page)}
    )
    assert away.location == "/dashboard/"


def test_a_failed_create_names_the_field_and_stores_nothing(app_client: App, db: Database) -> None:
    bad = app_client.post(
        "/dashboard/studies/new",
        "/dashboard/studies/new",
        {"name": "x", "hit_type": "comparison", "config": "{nope"},
    )
    assert bad.status_code == 422
    assert "<strong>config</strong>: not valid JSON" in bad.get_data(as_text=True)
    unknown = app_client.post(
        "/dashboard/studies/new",
        "/dashboard/studies/new",
        {"name": "x", "hit_type": "comparison", "config": '{"colour": 1}'},
    )
    assert unknown.status_code == 422 and "colour" in unknown.get_data(as_text=True)
    # What was typed stays in the form.
    assert 'value="x"' in unknown.get_data(as_text=True)
    assert _count(db, Study) == 0
    study_id = app_client.create(annotations_per_item="2")
    with db.session() as session:
        assert session.get(Study, study_id).config["annotations_per_item"] == 2


def test_items_are_checked_line_by_line_before_anything_is_stored(
    app_client: App, db: Database
) -> None:
    study_id = app_client.create()
    page = f"/dashboard/studies/{study_id}"
    broken = COMPARISON_CSV + "q3,,only one|\nq1,Again?,a|b\n"
    reply = app_client.post(
        page,
        f"{page}/items",
        {
            "action": "check",
            "format": "auto",
            "file": (io.BytesIO(broken.encode()), "items.csv"),
        },
        content_type="multipart/form-data",
    )
    html = reply.get_data(as_text=True)
    assert reply.status_code == 200
    assert "2 of 4 lines are ready" in html and "2 have problems" in html
    assert 'id="store-items"' not in html  # no way to store a file with a bad line
    assert _count(db, Item) == 0
    good = app_client.post(
        page,
        f"{page}/items",
        {
            "action": "check",
            "file": (io.BytesIO(COMPARISON_CSV.encode()), "items.csv"),
        },
        content_type="multipart/form-data",
    )
    assert "2 of 2 lines are ready" in good.get_data(as_text=True)
    assert _count(db, Item) == 0  # a check stores nothing
    text = re.search(r'<textarea name="text" hidden>(.*?)</textarea>', good.text, re.S)
    assert text is not None
    stored = app_client.post(
        page,
        f"{page}/items",
        {
            "action": "store",
            "format": "csv",
            "filename": "items.csv",
            "text": text[1].replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&"),
        },
    )
    assert stored.status_code == 302
    assert _count(db, Item, study_id=study_id) == 2
    not_utf8 = app_client.post(
        page,
        f"{page}/items",
        {
            "action": "check",
            "file": (io.BytesIO("id,query\nq9,caf\xe9\n".encode("latin-1")), "x.csv"),
        },
        content_type="multipart/form-data",
    )
    assert not_utf8.status_code == 422 and "<strong>line 2</strong>: not UTF-8" in not_utf8.text


def test_settings_change_freely_in_a_draft_and_only_qc_once_published(
    app_client: App, db: Database, make_study: Callable[..., int]
) -> None:
    study_id = app_client.create()
    page = f"/dashboard/studies/{study_id}"
    saved = app_client.post(page, f"{page}/settings", {"config": '{"annotations_per_item": 5}'})
    assert saved.status_code == 302
    with db.session() as session:
        config = session.get(Study, study_id).config
    assert config["annotations_per_item"] == 5 and "gold" in config["qc"]  # defaults filled
    published = make_study()
    page = f"/dashboard/studies/{published}"
    refused = app_client.post(page, f"{page}/settings", {"config": '{"annotations_per_item": 9}'})
    assert refused.status_code == 422
    assert "<strong>annotations_per_item</strong>: cannot change once" in refused.text
    with db.session() as session:
        config = dict(session.get(Study, published).config)
    config["qc"] = {**config["qc"], "gold": {"threshold": 0.9}}
    import json

    assert (
        app_client.post(page, f"{page}/settings", {"config": json.dumps(config)}).status_code == 302
    )
    with db.session() as session:
        assert session.get(Study, published).config["qc"]["gold"]["threshold"] == 0.9


def test_pause_resume_close_and_archive(
    app_client: App, db: Database, make_study: Callable[..., int]
) -> None:
    study_id = make_study()
    page = f"/dashboard/studies/{study_id}"

    def act(action: str) -> Any:
        return app_client.post(page, f"{page}/status", {"action": action})

    assert act("pause").status_code == 302
    with db.session() as session:
        assert session.get(Study, study_id).status == "paused"
    assert act("pause").status_code == 302  # twice is harmless
    act("resume")
    act("archive")
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study.status == "completed" and study.archived_at is not None
    assert f'/dashboard/studies/{study_id}"' not in app_client.get("/dashboard/").text
    assert f'/dashboard/studies/{study_id}"' in app_client.get("/dashboard/?archived=1").text
    refused = act("resume")
    assert refused.status_code == 409 and "cannot resume" in refused.text


def test_publish_estimates_first_and_names_what_is_missing(app_client: App, db: Database) -> None:
    study_id = app_client.create(annotations_per_item="3")
    page = f"/dashboard/studies/{study_id}"
    app_client.post(
        page,
        f"{page}/items",
        {
            "action": "store",
            "format": "csv",
            "text": COMPARISON_CSV,
        },
    )
    none = app_client.post(page, f"{page}/publish", {"action": "estimate"})
    assert none.status_code == 422 and "<strong>providers</strong>" in none.text
    no_reward = app_client.post(
        page, f"{page}/publish", {"action": "estimate", "provider_mturk": "on"}
    )
    assert no_reward.status_code == 422 and "<strong>reward</strong>" in no_reward.text
    estimate = app_client.post(
        page,
        f"{page}/publish",
        {
            "action": "estimate",
            "provider_mturk": "on",
            "reward_mturk": "0.50",
            "mturk_sandbox": "on",
            "options_mturk": '{"items_per_session": 2}',
        },
    )
    text = estimate.get_data(as_text=True)
    # 3 assignments a HIT (the study's answers per item), each $0.50 + MTurk's $0.10 fee.
    plan = re.search(r"(\d+) HIT\(s\) x 3 assignment\(s\), 2 item\(s\) each, on the sandbox", text)
    assert plan is not None, text
    assert f"{int(plan[1]) * 3 * 0.60:.2f} USD" in text
    assert "$0.50 reward + $0.10 MTurk fee per assignment" in text
    with db.session() as session:
        assert session.get(Study, study_id).status == "draft"  # an estimate publishes nothing
    published = app_client.post(
        page, f"{page}/publish", {"action": "publish", "provider_local": "on"}
    )
    assert published.status_code == 302
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study.status == "published" and study.providers == ["local"]


def test_keys_are_created_once_shown_and_revoked(
    client: FlaskClient, db: Database, api_key: str
) -> None:
    app = App(client, api_key)
    made = app.post("/dashboard/keys", "/dashboard/keys", {})
    assert made.status_code == 201
    new_key = re.search(r'<code id="new-key">([^<]+)</code>', made.text)
    assert new_key is not None
    assert new_key[1] not in app.get("/dashboard/keys").text  # shown once
    with db.session() as session:
        row = session.scalar(select(ApiKey).order_by(ApiKey.id.desc()))
        assert row is not None and new_key[1] not in row.key_hash
        key_id = row.id
    assert (
        client.get("/api/studies", headers={"Authorization": f"Bearer {new_key[1]}"}).status_code
        == 200
    )
    app.post("/dashboard/keys", f"/dashboard/keys/{key_id}/revoke", {})
    assert (
        client.get("/api/studies", headers={"Authorization": f"Bearer {new_key[1]}"}).status_code
        == 401
    )
    # Another experimenter's key cannot be revoked from here.
    with db.session() as session:
        create_api_key(session, "bob")
        bobs = session.scalar(select(ApiKey.id).order_by(ApiKey.id.desc()))
    assert app.post("/dashboard/keys", f"/dashboard/keys/{bobs}/revoke", {}).status_code == 404


def test_another_experimenters_study_is_not_there(
    client: FlaskClient, db: Database, make_study: Callable[..., int]
) -> None:
    study_id = make_study()  # the "tester" key's
    with db.session() as session:
        bob = create_api_key(session, "bob")
    app = App(client, bob)
    for path in ("", "/live", "/preview", "/preview/page", "/export?format=csv"):
        assert app.get(f"/dashboard/studies/{study_id}{path}").status_code == 404, path
    assert "test study" not in app.get("/dashboard/").text


def test_the_preview_walks_the_items_and_stores_nothing(app_client: App, db: Database) -> None:
    study_id = app_client.create()
    page = f"/dashboard/studies/{study_id}"
    app_client.post(
        page, f"{page}/items", {"action": "store", "format": "csv", "text": COMPARISON_CSV}
    )
    frame = app_client.get(f"{page}/preview/page")
    assert frame.status_code == 200 and 'data-api-base="/dashboard/preview"' in frame.text
    client = app_client.client
    first = client.post(f"/dashboard/preview/studies/{study_id}/next", json={})
    assert first.status_code == 200, first.text
    view = first.get_json()
    assert view["item_id"] == "q1" and len(view["task"]["candidates"]) == 4
    assert (view["item_number"], view["items_total"]) == (1, 2)
    again = client.post(f"/dashboard/preview/studies/{study_id}/next", json={}).get_json()
    assert again["item_id"] == "q1"  # the open item, until it is answered
    answered = client.post(
        f"/dashboard/preview/assignments/{study_id}/step",
        json={"step": view["task"]["step"], "choice": 0},
    ).get_json()
    assert answered["answered"] is True and "feedback" in answered
    second = client.post(f"/dashboard/preview/studies/{study_id}/next", json={}).get_json()
    assert second["item_id"] == "q2"
    bad = client.post(
        f"/dashboard/preview/assignments/{study_id}/step",
        json={"step": second["task"]["step"], "choice": 99},
    )
    assert bad.status_code == 409 and "error" in bad.get_json()  # as the worker API answers
    for model in (Assignment, Response, OutboxEvent):
        assert _count(db, model) == 0, model


def test_exports_download_in_every_format_of_the_type(
    app_client: App, make_study: Callable[..., int]
) -> None:
    study_id = make_study()
    for fmt in ("jsonl", "csv", "roft"):
        reply = app_client.get(f"/dashboard/studies/{study_id}/export?format={fmt}")
        assert reply.status_code == 200
        assert "attachment" in reply.headers["Content-Disposition"]
    wrong = app_client.get(f"/dashboard/studies/{study_id}/export?format=kway")
    assert wrong.status_code == 422 and "format" in wrong.text


def test_webhooks_are_added_with_their_secret_shown_once_and_removed(
    app_client: App, make_study: Callable[..., int]
) -> None:
    study_id = make_study()
    page = f"/dashboard/studies/{study_id}"
    bad = app_client.post(page, f"{page}/webhooks", {"url": "not a url"})
    assert bad.status_code == 422 and "<strong>url</strong>" in bad.text
    made = app_client.post(
        page, f"{page}/webhooks", {"url": "https://example.org/hook", "events": ["response.stored"]}
    )
    assert made.status_code == 201 and 'id="webhook-secret">whsec_' in made.text
    listed = app_client.get(page).text
    row = '<td class="url">https://example.org/hook</td>'
    assert row in listed and "whsec_" not in listed
    hook_id = re.search(r"/webhooks/(\d+)/remove", listed)
    assert hook_id is not None
    app_client.post(page, f"{page}/webhooks/{hook_id[1]}/remove", {})
    assert row not in app_client.get(page).text
