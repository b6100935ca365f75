"""The experimenter's REST API, exports, reports, the dashboard and the game's pages."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from flask.testing import FlaskClient

from crowd.queue.runner import run_worker
from crowd.settings import Settings
from tests.conftest import join, log_in_to_dashboard, passage
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
        assert reply.status_code == 422 and reply.get_json()["error"], body
    # A Likert rating's random answer is right within one step 0.52 of the time: a gold
    # threshold of 0.5 could never stop a random clicker.
    body = {"name": "s", "hit_type": "likert", "config": {"qc": {"gold": {"threshold": 0.5}}}}
    reply = client.post("/api/studies", headers=auth, json=body)
    problem = reply.get_json()
    assert reply.status_code == 422 and problem["field"] == "qc"
    assert "qc.gold.threshold (0.5) must be above qc.gold.chance (0.52)" in problem["error"]
    body["config"]["qc"]["gold"]["threshold"] = 0.6
    assert client.post("/api/studies", headers=auth, json=body).status_code == 201


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
    assert log_in_to_dashboard(client, "crowd_x_y").status_code == 401
    assert log_in_to_dashboard(client, api_key).status_code == 302
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


# -- declared bodies: what the models refuse, and where ---------------------------------------
def _problem(reply: Any) -> tuple[int, str | None]:
    return reply.status_code, reply.get_json().get("field")


def test_unknown_keys_and_wrong_types_are_refused_naming_the_field(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study = {"name": "s", "hit_type": "boundary"}
    assert _problem(client.post("/api/studies", headers=auth, json={**study, "colour": 1})) == (
        422, "colour",
    )  # fmt: skip
    # A study's config is the HIT type's: an object, checked by the type, never a list.
    assert _problem(client.post("/api/studies", headers=auth, json={**study, "config": []})) == (
        422, "config",
    )  # fmt: skip
    typo = client.post("/api/studies", headers=auth,
                       json={**study, "config": {"annotation_per_item": 3}})  # fmt: skip
    assert typo.status_code == 422 and "annotation_per_item" in typo.get_json()["error"]
    unknown = client.post("/api/studies", headers=auth, json={**study, "hit_type": "nope"})
    assert _problem(unknown) == (422, "hit_type") and "boundary" in unknown.get_json()["error"]
    assert client.get("/api/studies", headers=auth).get_json() == {"studies": []}

    study_id = make_study(providers=("local",))
    url = f"/api/studies/{study_id}"
    # `provider` (singular) is a typo of `providers`: refused, not published to local instead.
    assert _problem(client.post(f"{url}/publish", headers=auth, json={"provider": "sim"})) == (
        422, "provider",
    )  # fmt: skip
    assert client.get(url, headers=auth).get_json()["providers"] == ["local"]
    for body, field in (
        ({"providers": ["sim", "nope"]}, "providers[1]"),
        ({"providers": []}, "providers"),
        ({"providers": ["sim"], "options": {"nope": {}}}, "options.nope"),
        ({"providers": ["sim"], "options": {"sim": []}}, "options.sim"),
    ):
        assert _problem(client.post(f"{url}/publish", headers=auth, json=body)) == (422, field)
    null = client.post(f"{url}/publish", headers=auth, data="null", content_type="application/json")
    assert null.status_code == 422
    published = client.post(f"{url}/publish", headers=auth, json={"providers": ["sim"]})
    assert published.status_code == 200 and published.get_json()["providers"] == ["local", "sim"]

    # Aggregations: `methods` is the key, in the body and in the query.
    assert _problem(client.post(f"{url}/aggregations", headers=auth, json={"method": "mace"})) == (
        422, "method",
    )  # fmt: skip
    methods = client.post(f"{url}/aggregations", headers=auth, json={"methods": ["mace", "x"]})
    assert _problem(methods) == (422, "methods[1]")
    assert _problem(client.get(f"{url}/aggregations?method=mace", headers=auth)) == (422, "method")
    assert client.get(f"{url}/aggregations?methods=mace", headers=auth).get_json() == {
        "aggregations": {}
    }


def test_items_in_a_json_body_are_named_by_their_place(
    client: FlaskClient, auth: dict[str, str]
) -> None:
    study_id = client.post(
        "/api/studies", headers=auth, json={"name": "s", "hit_type": "boundary"}
    ).get_json()["id"]
    url = f"/api/studies/{study_id}/items"
    good = [passage("a", 2), passage("b", 3)]
    assert _problem(client.post(url, headers=auth, json={"items": [*good, "c"]})) == (
        422, "items[2]",
    )  # fmt: skip
    assert _problem(client.post(url, headers=auth, json={"items": []})) == (422, "items")
    typo = client.post(url, headers=auth, json={"item": good}).get_json()
    assert {problem["field"] for problem in typo["errors"]} == {"items", "item"}
    # The HIT type's own checks name the item by its place too (and its id).
    bad = client.post(url, headers=auth, json={"items": [good[0], passage("b", 9, n=3)]})
    assert bad.status_code == 422 and bad.get_json()["field"].startswith("items[1]")
    assert client.post(url, headers=auth, json={"items": good}).get_json() == {"added": 2}


def test_json_lines_the_checks_refuse_are_named_by_their_line(
    client: FlaskClient, auth: dict[str, str]
) -> None:
    study_id = client.post(
        "/api/studies", headers=auth, json={"name": "s", "hit_type": "boundary"}
    ).get_json()["id"]
    url = f"/api/studies/{study_id}/items"
    good = json.dumps(passage("a", 2)) + "\n"
    for body in (
        good + '{"id": ' + "[" * 200 + "]" * 200 + "}\n",  # past the depth limit
        good + '{"id": 1' + "0" * 5000 + "}\n",  # past Python's digit limit
        good + '{"id": 1' + "0" * 30 + "}\n",  # past 64 bits
        good + '{"id": NaN}\n',
        good + '{"id": "\\ud800"}\n',  # a lone surrogate: no database stores it
    ):
        reply = client.post(url, headers=auth, data=body, content_type="application/x-ndjson")
        assert reply.status_code == 422, body[:80]
        assert reply.get_json()["field"].startswith("line 2"), reply.get_json()
    nul = client.post(url, headers=auth, data=good + '{"id": "b\x00"}\n',
                      content_type="application/x-ndjson")  # fmt: skip
    assert _problem(nul) == (422, "line 2")
    latin = client.post(url, headers=auth, data=good.encode() + b'{"id": "caf\xe9"}\n',
                        content_type="application/x-ndjson")  # fmt: skip
    assert _problem(latin) == (422, "line 2")
    form = client.post(url, headers=auth, data={"items": good})
    assert form.status_code == 415
    empty = client.post(url, headers=auth, data="\n\n", content_type="application/x-ndjson")
    assert empty.status_code == 422
    status = client.get(f"/api/studies/{study_id}", headers=auth).get_json()
    assert status["progress"]["items"] == {}


def test_queries_are_bounded_and_checked(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study()
    url = f"/api/studies/{study_id}"
    for query, field in (
        ("audit?limit=0", "limit"),
        ("audit?limit=5001", "limit"),
        ("audit?worker=abc", "worker"),
        (f"audit?worker={2**63}", "worker"),
        ("workers?sort=colour", "sort"),
        ("export?format=xml", "format"),
        ("export?set=all", "set"),
        # A format of another HIT type: the study's type refuses it.
        ("export?format=pairwise", "format"),
    ):
        assert _problem(client.get(f"{url}/{query}", headers=auth)) == (422, field), query
    assert client.get(f"{url}/audit?limit=5000", headers=auth).status_code == 200
    assert client.get(f"/api/studies/{2**63}", headers=auth).status_code == 404
    # The game's JSON names the field; its page answers as it always did.
    long = "x" * 101
    assert _problem(client.get(f"/api/play/leaderboard?category={long}")) == (422, "category")
    assert client.get(f"/play/leaderboard?category={long}").status_code == 404
    assert client.get("/api/play/profile").status_code == 401


def test_every_route_of_the_experimenter_and_game_apis_is_declared(app: Any) -> None:
    from crowd.web.contract import operation_of

    spec = app.test_client().get("/openapi.json").get_json()
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("api.") or rule.rule.startswith("/api/play/"):
            assert operation_of(app.view_functions[rule.endpoint]) is not None, rule.rule
            path = rule.rule.replace("<int:", "{").replace(">", "}")
            for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}:
                described = spec["paths"][path][method.lower()]
                for status, response in described["responses"].items():
                    assert response["content"], (path, method, status)
    schemas = spec["components"]["schemas"]
    for name in ("NewStudy", "Publish", "WorkerAction", "BulkAction", "Aggregate", "NewItems",
                 "NewRewardRun", "RewardSettings"):  # fmt: skip
        assert schemas[name]["additionalProperties"] is False, name
    for path in ("/api/studies/{study_id}/items", "/api/studies/{study_id}/items/check"):
        items = spec["paths"][path]["post"]["requestBody"]["content"]
        assert set(items) == {"application/json", "application/x-ndjson", "text/csv"}, path


def test_the_declared_enumerations_are_the_domains() -> None:
    import typing

    from crowd import review
    from crowd.quality import labels
    from crowd.studies import annotations
    from crowd.web.schemas import review as review_schemas
    from crowd.web.schemas import studies as study_schemas
    from crowd.web.schemas import training as training_schemas
    from models.reward import config

    def values(alias: Any) -> tuple[str, ...]:
        return typing.get_args(alias)

    assert values(review_schemas.Action) == review.ACTIONS
    assert values(review_schemas.BulkActionName) == review.BULK_ACTIONS
    assert values(review_schemas.SortKey) == review.SORT_KEYS
    assert set(values(review_schemas.Sort)) == {
        *review.SORT_KEYS,
        *(f"-{key}" for key in review.SORT_KEYS),
    }
    assert values(review_schemas.Method) == labels.METHODS
    assert values(study_schemas.AnnotationFormat) == annotations.FORMATS
    assert set(values(study_schemas.ExportFormat)) == set(api_export_types())
    assert values(training_schemas.LabelSource) == config.LABEL_SOURCES
    assert values(training_schemas.Kind) == config.KINDS
    assert values(training_schemas.Pooling) == config.POOLINGS
    assert values(training_schemas.Device) == config.DEVICES


def api_export_types() -> dict[str, str]:
    from crowd.web.results import EXPORT_TYPES

    return EXPORT_TYPES
