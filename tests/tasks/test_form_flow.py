"""The form HIT type through the real app: the experimenter's API creates the study and its
items, workers answer through the worker API, bad answers are refused naming the field, gold
and attention items are judged from the stored response, simulated workers play it."""

from __future__ import annotations

import json
from typing import Any

from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.accounts import authenticate
from crowd.platforms.publishing import open_study
from crowd.settings import Settings
from crowd.storage import Database, Item, Response, Study
from crowd.studies.lifecycle import create_study, import_items
from crowd.studies.reports import analysis_rows, build_report, platform_rows
from tests.conftest import join
from tests.tasks.form_helpers import records, sample_config

SECRET_KEYS = {"expected", "tolerance", "meta", "truth", "group"}
SECRET_VALUES = ("secret-group", "secret-truth")


def keys(value: Any) -> set[str]:
    """Every key of every object in a JSON value, however nested."""
    if isinstance(value, dict):
        return set(value).union(*(keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(keys(v) for v in value))
    return set()


def create(
    client: FlaskClient, auth: dict[str, str], config: dict[str, Any], items: list[dict[str, Any]]
) -> int:
    created = client.post(
        "/api/studies",
        headers=auth,
        json={"name": "summaries", "hit_type": "form", "config": config},
    )
    assert created.status_code == 201, created.get_json()
    study_id = int(created.get_json()["id"])
    lines = "".join(json.dumps(item) + "\n" for item in items)
    added = client.post(
        f"/api/studies/{study_id}/items",
        headers=auth,
        data=lines,
        content_type="application/x-ndjson",
    )
    assert added.status_code == 201, added.get_json()
    published = client.post(
        f"/api/studies/{study_id}/publish", headers=auth, json={"providers": ["local", "sim"]}
    )
    assert published.status_code == 200, published.get_json()
    return study_id


def config(**extra: Any) -> dict[str, Any]:
    return {**sample_config(), "annotations_per_item": 1, "attention_rate": 0.0, **extra}


def next_view(client: FlaskClient, who: dict[str, str], study_id: int) -> dict[str, Any]:
    reply = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
    assert reply.status_code == 200, reply.get_json()
    return dict(reply.get_json())


def send(client: FlaskClient, who: dict[str, str], view: dict[str, Any], body: Any) -> Any:
    return client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": view["task"]["step"], **body},
        headers=who,
    )


GOOD = {
    "faithfulness": 4,
    "problems": ["missing", "other"],
    "other problem": "  too vague ",
    "strengths": [2, 0, 1],
}


def positions(view: dict[str, Any], field_id: str, indexes: list[int]) -> list[int]:
    """A ranking of declared indexes as the page sends it: positions in the shown order."""
    (field,) = [f for f in view["task"]["fields"] if f["id"] == field_id]
    return [field["order"].index(index) for index in indexes]


def as_shown(view: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """The sample's answer with its rank (declared indexes) as the page would send it."""
    if fields.get("strengths") is None:
        return fields
    return {**fields, "strengths": positions(view, "strengths", fields["strengths"])}


def test_a_worker_answers_a_form_and_bad_answers_are_refused_naming_the_field(
    client: FlaskClient, auth: dict[str, str], db: Database
) -> None:
    item = {
        **records("items.jsonl")[0],
        "meta": {"group": "secret-group", "truth": {"x": "secret-truth"}},
    }
    study_id = create(client, auth, config(), [item])
    who = join(client, auth)
    view = next_view(client, who, study_id)
    task = view["task"]
    assert [a["content"] for a in task["attachments"]] == [
        a["content"] for a in item["attachments"]
    ]
    assert [f["id"] for f in task["fields"]] == [
        "faithfulness",
        "problems",
        "other problem",
        "strengths",
    ]
    assert task["fields"][2]["show_if"] == {"field": "problems", "in": ["other"]}
    # The rank's things come in this assignment's start order; answers name positions in it.
    declared = [c["value"] for c in sample_config()["fields"][3]["choices"]]
    order = task["fields"][3]["order"]
    assert sorted(order) == [0, 1, 2]
    assert [c["value"] for c in task["fields"][3]["choices"]] == [declared[i] for i in order]
    reloaded = client.get(f"/api/work/assignments/{view['assignment_id']}", headers=who)
    assert reloaded.get_json()["task"]["fields"][3] == task["fields"][3]
    assert task["instructions"].startswith("Each task shows")
    assert not keys(view) & SECRET_KEYS
    assert not any(secret in json.dumps(view) for secret in SECRET_VALUES)
    bad = [
        ({k: v for k, v in GOOD.items() if k != "faithfulness"}, "fields.faithfulness", "required"),
        ({**GOOD, "faithfulness": 6}, "fields.faithfulness", "from 1 to 5"),
        ({**GOOD, "faithfulness": True}, "fields.faithfulness", "whole number"),
        ({**GOOD, "problems": ["missing"]}, "fields.other problem", "hidden"),
        (
            {**GOOD, "problems": ["missing", "invented", "unclear", "other"]},
            "fields.problems",
            "choose 0 to 3, not 4",
        ),
        ({**GOOD, "problems": ["lost"]}, "fields.problems", "not a choice"),
        ({**GOOD, "problems": "other"}, "fields.problems", "list of choice values"),
        ({**GOOD, "other problem": "x" * 301}, "fields.other problem", "at most 300"),
        ({**GOOD, "other problem": "abc"}, "fields.other problem", "at least 5"),
        ({**GOOD, "other problem": "   "}, "fields.other problem", "required"),
        ({**GOOD, "strengths": [0, 0, 1]}, "fields.strengths", "indexes 0 to 2"),
        ({**GOOD, "strengths": [0, 1]}, "fields.strengths", "indexes 0 to 2"),
        ({**GOOD, "colour": "red"}, "fields.colour", "no such field"),
        ({**GOOD, "strengths": None}, "fields.strengths", "required"),
        ({k: v for k, v in GOOD.items() if k != "strengths"}, "fields.strengths", "required"),
    ]
    for fields, where, message in bad:
        reply = send(client, who, view, {"fields": as_shown(view, fields)})
        assert reply.status_code == 422, (fields, reply.get_json())
        assert reply.get_json()["field"] == where, reply.get_json()
        assert message in reply.get_json()["error"], reply.get_json()
    # The API's body bounds what a field holds, and takes only the form's own key.
    assert send(client, who, view, {"fields": {"x": {"a": 1}}}).status_code == 422
    assert send(client, who, view, {"fields": "all good"}).get_json()["field"] == "fields"
    assert send(client, who, view, {"rating": 3}).get_json()["field"] == "rating"
    with db.session() as session:
        assert session.scalars(select(Response)).all() == []  # nothing stored by refusals
    done = send(client, who, view, {"fields": as_shown(view, GOOD)})
    assert done.status_code == 200, done.get_json()
    assert done.get_json()["feedback"] == {"message": "Thank you! Your answers are saved."}
    again = send(client, who, view, {"fields": {**GOOD, "faithfulness": 1}})  # a retry
    assert again.get_json()["feedback"] == done.get_json()["feedback"]
    with db.session() as session:
        (response,) = session.scalars(select(Response)).all()
        assert response.answer == {
            "fields": {
                "faithfulness": 4,
                "problems": ["missing", "other"],
                "other problem": "too vague",
                "strengths": [2, 0, 1],
            }
        }
        assert [event["type"] for event in response.events] == ["show", "submit"]
        assert response.events[0]["orders"] == {"strengths": order}
        assert response.score is None
    assert next_view(client, who, study_id)["done"] is True


def test_hidden_and_optional_fields_are_stored_as_none(
    client: FlaskClient, auth: dict[str, str], db: Database
) -> None:
    fields = sample_config()["fields"]
    fields[3] = {**fields[3], "required": False}
    study_id = create(client, auth, config(fields=fields), records("items.jsonl")[:1])
    who = join(client, auth)
    view = next_view(client, who, study_id)
    reply = send(
        client, who, view, {"fields": {"faithfulness": 5, "problems": [], "other problem": None}}
    )
    assert reply.status_code == 200, reply.get_json()
    with db.session() as session:
        (response,) = session.scalars(select(Response)).all()
        assert response.answer == {
            "fields": {"faithfulness": 5, "problems": [], "other problem": None, "strengths": None}
        }


def test_items_with_their_own_fields_in_a_study_without_any(
    client: FlaskClient, auth: dict[str, str], db: Database
) -> None:
    own = [
        {"id": "best", "type": "rank", "title": "Which text is best?"},
        {"id": "note", "type": "text", "title": "Anything to add?", "required": False},
    ]
    item = {
        "id": "pair",
        "attachments": [
            {"type": "text", "content": "first"},
            {"type": "html", "content": "<p>second<script>x</script></p>"},
        ],
        "fields": own,
    }
    refused = client.post(
        "/api/studies",
        headers=auth,
        json={"name": "n", "hit_type": "form", "config": {"colour": 1}},
    )
    assert refused.status_code == 422 and refused.get_json()["field"] == "colour"
    study_id = create(client, auth, {"annotations_per_item": 1}, [item])
    lines = json.dumps({"id": "bare", "text": "no fields"}) + "\n"
    bare = client.post(
        f"/api/studies/{study_id}/items",
        headers=auth,
        data=lines,
        content_type="application/x-ndjson",
    )
    assert bare.status_code == 422 and "declares no fields" in bare.get_json()["error"]
    who = join(client, auth)
    view = next_view(client, who, study_id)
    assert [f["id"] for f in view["task"]["fields"]] == ["best", "note"]
    assert view["task"]["attachments"][1] == {"type": "html", "content": "<p>second</p>"}
    (best,) = [f for f in view["task"]["fields"] if f["id"] == "best"]
    assert sorted(best["order"]) == [0, 1] and "choices" not in best  # the attachments
    assert send(client, who, view, {"fields": {"best": [0, 1, 2]}}).status_code == 422
    assert (
        send(client, who, view, {"fields": {"best": positions(view, "best", [1, 0])}}).status_code
        == 200
    )
    with db.session() as session:
        (response,) = session.scalars(select(Response)).all()
        assert response.answer == {"fields": {"best": [1, 0], "note": None}}


def test_gold_is_scored_and_attention_judged_from_the_stored_response(
    client: FlaskClient, auth: dict[str, str], db: Database
) -> None:
    real = records("items.jsonl")[0]
    gold = records("gold.jsonl")[0]  # faithfulness 5 (within 1), problems none
    check = records("attention.jsonl")[0]  # faithfulness 1, problems ["unclear"]
    gold_first = {"gold": {"min_rate": 1.0, "max_rate": 1.0}}
    study_id = create(
        client,
        auth,
        config(annotations_per_item=2, attention_rate=0.5, qc=gold_first),
        [real, gold, check],
    )
    answers = {
        "w1": {
            real["id"]: {"faithfulness": 2, "problems": []},
            gold["id"]: {"faithfulness": 4, "problems": []},
            check["id"]: {"faithfulness": 1, "problems": ["unclear"]},
        },
        "w2": {
            real["id"]: {"faithfulness": 2, "problems": []},
            gold["id"]: {"faithfulness": 3, "problems": []},
            check["id"]: {"faithfulness": 1, "problems": ["unclear", "missing"]},
        },
    }
    by_text = {
        real["attachments"][0]["content"]: real["id"],
        gold["attachments"][0]["content"]: gold["id"],
        check["attachments"][0]["content"]: check["id"],
    }
    for worker, mine in answers.items():
        who = join(client, auth, external_id=worker)
        for _ in range(3):
            view = next_view(client, who, study_id)
            item_id = by_text[view["task"]["attachments"][0]["content"]]
            body = {"fields": {**mine[item_id], "strengths": [0, 1, 2]}}
            assert send(client, who, view, body).status_code == 200
        assert next_view(client, who, study_id)["done"] is True
    with db.session() as session:
        stored = {
            (response.worker.external_id, item.external_id): response
            for response, item in session.execute(
                select(Response, Item).join(Item, Item.id == Response.item_id)
            )
        }
    assert stored["w1", gold["id"]].score == 1.0  # 4 is within 1 of 5; no problems as expected
    assert stored["w2", gold["id"]].score == 0.5  # 3 is 2 away
    assert stored["w1", check["id"]].qc_flags["attention_passed"] is True
    assert stored["w2", check["id"]].qc_flags["attention_passed"] is False


def test_the_simulated_crowd_plays_the_sample_study_and_the_report_and_exports_follow(
    live_server: Any, api_key: str, db: Database, settings: Settings
) -> None:
    from crowd.platforms.providers.sim import SimulatedCrowd

    items = records("items.jsonl")[:8] + records("gold.jsonl") + records("attention.jsonl")
    with db.session() as session:
        study = create_study(
            session,
            authenticate(session, api_key),
            "sim",
            "form",
            config(annotations_per_item=3, attention_rate=0.2),
        )
        import_items(session, study, json.loads(json.dumps(items)))
        open_study(session, study, ("local", "sim"))
        study_id = study.id
    mix = {"careful": 2, "noisy": 1, "random_clicker": 1, "attention_failer": 1}
    crowd = SimulatedCrowd(
        live_server.url, api_key, study_id, "form", items, mix, seed=7, items_per_worker=8
    )
    result = crowd.run(threads=2)
    assert result.errors == []
    with db.session() as session:
        rows = platform_rows(session, session.get(Study, study_id))
        report = build_report(session, settings, study_id)
    assert len(rows) >= 30
    assert all(
        set(row["answer"]["fields"]) == {"faithfulness", "problems", "other problem", "strengths"}
        for row in rows
    )
    kinds = {row["worker"]: row["worker"].split("-")[1] for row in rows}
    checks = [
        (kinds[row["worker"]], row["qc_flags"]["attention_passed"])
        for row in rows
        if row["kind"] == "attention"
    ]
    assert checks and all(passed for kind, passed in checks if kind in ("careful", "noisy"))
    gold = [row for row in rows if row["kind"] == "gold"]
    careful = [row["score"] for row in gold if kinds[row["worker"]] == "careful"]
    assert careful and min(careful) >= 0.5
    # The other helper's analysis reads the rows this type builds (fields and their types).
    assert [f["id"] for f in report.data["full"]["fields"]][:2] == ["faithfulness", "problems"]
    with db.session() as session:
        analysed, _ = analysis_rows(session, session.get(Study, study_id))
    assert analysed[0]["field_types"]["strengths"]["choices"] == ["accuracy", "brevity", "clarity"]


def test_form_items_upload_as_csv_with_numbered_attachment_columns(
    client: FlaskClient, auth: dict[str, str], db: Database
) -> None:
    table = (
        "id,kind,attachments.0.type,attachments.0.content,attachments.1.type,"
        "attachments.1.content,expected,tolerance.faithfulness,meta.group\n"
        's1,gold,text,"A summary,\nover two lines",html,<p>src<script>x()</script></p>,'
        '"{""faithfulness"": 4, ""problems"": [""missing""]}",1,good\n'
        "s2,,text,Plain,text,Source,,,weak\n"
        "s3,,text,Plain,video,clip,,,weak\n"
    )
    created = client.post(
        "/api/studies", headers=auth, json={"name": "csv", "hit_type": "form", "config": config()}
    )
    url = f"/api/studies/{created.get_json()['id']}/items"
    preview = client.post(f"{url}/check", headers=auth, data=table, content_type="text/csv")
    lines = preview.get_json()["lines"]
    assert [(line["ok"], line["field"]) for line in lines] == [
        (True, None),
        (True, None),
        (False, "attachments[1].type"),
    ]
    added = client.post(url, headers=auth, data=table.rsplit("s3,", 1)[0], content_type="text/csv")
    assert added.status_code == 201, added.get_json()
    with db.session() as session:
        gold = session.scalars(select(Item).where(Item.external_id == "s1")).one()
        assert gold.content["attachments"] == [
            {"type": "text", "content": "A summary,\nover two lines"},
            {"type": "html", "content": "<p>src</p>"},
        ]
        assert gold.expected == {
            "expected": {"faithfulness": 4, "problems": ["missing"]},
            "tolerance": {"faithfulness": 1},
        }
        assert gold.meta == {"group": "good"}


def test_each_assignment_draws_the_rank_order_and_the_simulator_answers_in_it() -> None:
    """The simulator reads the view it is given, so it sends a rank as positions in the shown
    order like a page, and the stored answer is the ranking it meant."""
    import random

    from tasks.form.simulate import FormSimulator, Truth
    from tests.tasks.form_helpers import HIT, NOW

    study = HIT.validate_config(sample_config()).to_config()
    content = HIT.validate_item(records("items.jsonl")[0]).content
    meant = {"faithfulness": 3, "problems": ["missing"], "strengths": [2, 0, 1]}
    truth = Truth(attention=meant)  # a careful reader gives a check exactly what it asks
    seen = set()
    for seed in range(30):
        started = HIT.start(content, NOW, study)
        task = HIT.view(content, started.progress, study)
        seen.add(tuple(task["fields"][3]["order"]))
        action = FormSimulator().act("careful", random.Random(seed), task, truth)
        stored = HIT.step(content, started.progress, action, NOW, study).answer
        assert stored is not None and stored["fields"]["strengths"] == [2, 0, 1]
        shown = [task["fields"][3]["choices"][p]["value"] for p in action["fields"]["strengths"]]
        assert shown == ["clarity", "accuracy", "brevity"]
    assert len(seen) > 1  # not one order for everyone
