"""The experimenter's REST API, exports, reports, the dashboard and the game's pages."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from flask.testing import FlaskClient

from crowd.queue.runner import run_worker
from crowd.settings import Settings
from tests.conftest import join, passage
from tests.crowd.work.test_assignments import play


def _jsonl(items: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(item) for item in items) + "\n"


def test_study_lifecycle_over_http(
    client: FlaskClient, auth: dict[str, str], settings: Settings
) -> None:
    assert client.get("/api/studies").status_code == 401
    created = client.post(
        "/api/studies",
        headers=auth,
        json={
            "name": "pilot",
            "hit_type": "boundary",
            "config": {"annotations_per_item": 1, "attention_rate": 0.5},
        },
    )
    assert created.status_code == 201
    study_id = created.get_json()["id"]
    items = [
        passage(
            "a",
            2,
            n=3,
            category="news",
            generator="gpt2",
            decoding={"strategy": "nucleus", "value": 0.4},
        ),
        passage("att", 3, n=3, kind="attention"),
    ]
    added = client.post(
        f"/api/studies/{study_id}/items",
        headers=auth,
        data=_jsonl(items),
        content_type="application/x-ndjson",
    )
    assert added.status_code == 201 and added.get_json() == {"added": 2}
    published = client.post(
        f"/api/studies/{study_id}/publish", headers=auth, json={"providers": ["local"]}
    )
    assert published.get_json()["links"]["local"]["game"].endswith(f"/play/{study_id}")

    player = join(client, name="Ada")
    # "All human" (3 of 3) is exact on the attention check and one late on item a.
    first = play(client, player, study_id, guess=3)
    second = play(client, player, study_id, guess=3)
    assert sorted([first["feedback"]["points"], second["feedback"]["points"]]) == [4, 5]

    status = client.get(f"/api/studies/{study_id}", headers=auth).get_json()
    assert status["progress"]["responses"] == 2 and status["progress"]["items_complete"] == 1

    run_worker(settings, burst=True)
    report = client.get(f"/api/studies/{study_id}/report", headers=auth).get_json()["report"]
    assert report["full"]["n_annotations"] == 1 and report["attention"]["n_checks"] == 1
    html = client.get(f"/api/studies/{study_id}/report.html", headers=auth)
    assert html.status_code == 200 and b"<html" in html.data.lower()
    assert (settings.reports_dir / f"study-{study_id}" / "report.json").exists()

    jsonl = client.get(f"/api/studies/{study_id}/export?format=jsonl", headers=auth)
    rows = [json.loads(line) for line in jsonl.get_data(as_text=True).splitlines()]
    assert [row["guess"] for row in rows] == [3, 3]
    table = client.get(f"/api/studies/{study_id}/export?format=csv", headers=auth)
    assert len(list(csv.DictReader(io.StringIO(table.get_data(as_text=True))))) == 2
    roft = client.get(f"/api/studies/{study_id}/export?format=roft", headers=auth)
    roft_rows = list(csv.DictReader(io.StringIO(roft.get_data(as_text=True))))
    real = [r for r in roft_rows if r["prompt_body"].startswith("a ")]
    # RoFT names the last human sentence: our boundary 2 is its 1.
    assert real[0]["true_boundary_index"] == "1" and real[0]["predicted_boundary_index"] == "2"


def test_bad_items_are_refused_whole_with_the_line(
    client: FlaskClient, auth: dict[str, str]
) -> None:
    study_id = client.post(
        "/api/studies", headers=auth, json={"name": "s", "hit_type": "boundary"}
    ).get_json()["id"]
    good = json.dumps(passage("a", 2))
    cases = {
        good + "\n{not json\n": "line 2",
        good + "\n" + json.dumps(passage("b", 9, n=3)) + "\n": "boundary",
        good + "\n" + good + "\n": "twice",
        json.dumps({"id": "c", "sentences": ["one"], "boundary": 1}): "sentences",
        json.dumps({**passage("d", 2), "colour": "red"}): "unknown keys",
    }
    for body, message in cases.items():
        reply = client.post(
            f"/api/studies/{study_id}/items",
            headers=auth,
            data=body,
            content_type="application/x-ndjson",
        )
        assert reply.status_code == 422, body
        assert message in reply.get_json()["error"]
    status = client.get(f"/api/studies/{study_id}", headers=auth).get_json()
    assert status["progress"]["items"] == {}  # nothing was half-imported


def test_bad_configs_and_types_are_refused(client: FlaskClient, auth: dict[str, str]) -> None:
    for body in (
        {"name": "s", "hit_type": "nope"},
        {"name": "s", "hit_type": "boundary", "config": {"attention_rate": 2}},
        {"name": "s", "hit_type": "boundary", "config": {"annotation_per_item": 3}},
        {"name": "", "hit_type": "boundary"},
    ):
        reply = client.post("/api/studies", headers=auth, json=body)
        assert reply.status_code in (422, 500) and reply.get_json()["error"]


def test_experimenters_only_see_their_own_studies(
    client: FlaskClient, auth: dict[str, str], db: Any
) -> None:
    from crowd.accounts import create_api_key

    study_id = client.post(
        "/api/studies", headers=auth, json={"name": "s", "hit_type": "boundary"}
    ).get_json()["id"]
    with db.session() as session:
        other = {"Authorization": f"Bearer {create_api_key(session, 'someone else')}"}
    assert client.get(f"/api/studies/{study_id}", headers=other).status_code == 404
    assert client.get("/api/studies", headers=other).get_json() == {"studies": []}
    bogus = {"Authorization": "Bearer crowd_000000000000_nope"}
    assert client.get("/api/studies", headers=bogus).status_code == 401


def test_openapi_describes_every_api_route(app: Any, client: FlaskClient) -> None:
    spec = client.get("/openapi.json").get_json()
    documented = set(spec["paths"])
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/"):
            path = rule.rule.replace("<int:", "{").replace(">", "}")
            assert path in documented, path


def test_dashboard_needs_a_key_and_lists_studies(
    client: FlaskClient, api_key: str, make_study: Any
) -> None:
    make_study()
    assert client.get("/dashboard/").status_code == 302
    assert client.post("/dashboard/login", data={"api_key": "crowd_x_y"}).status_code == 401
    client.post("/dashboard/login", data={"api_key": api_key})
    page = client.get("/dashboard/").get_data(as_text=True)
    assert "test study" in page and "boundary" in page


def test_game_profile_and_leaderboards(client: FlaskClient, make_study: Any) -> None:
    study_id = make_study(
        [passage("n1", 2, category="news"), passage("s1", 3, category="stories")],
        {"annotations_per_item": 2},
        providers=("local",),
    )
    ada = join(client, name="Ada")
    play(client, ada, study_id, guess=2)  # one item exact (5) ...
    play(client, ada, study_id, guess=5)  # ... and one late or exact
    client.delete_cookie("crowd_worker")
    bob = join(client, name="Bob")
    play(client, bob, study_id, guess=1)
    board = client.get("/api/play/leaderboard").get_json()["leaderboard"]
    assert [row["name"] for row in board] == ["Ada", "Bob"]
    assert board[0]["annotations"] == 2 and board[1]["points"] == 0
    news = client.get("/api/play/leaderboard?category=news").get_json()["leaderboard"]
    assert all(row["annotations"] == 1 for row in news)
    profile = client.get("/api/play/profile", headers=ada).get_json()
    assert profile["name"] == "Ada" and set(profile["by_category"]) == {"news", "stories"}
    assert "Ada" in client.get("/play/leaderboard").get_data(as_text=True)
    home = client.get("/play").get_data(as_text=True)
    assert "news" in home and "stories" in home
