"""Aggregation per field of a form study: each method is fitted to each field on its own, so
fields whose labels look alike (a rating of 1, a category "1", a rank's top index 1) share
neither classes nor the workers' estimated confusion."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.quality import labels
from crowd.storage import AggregatedLabels, Database, Item, Response, Study, Worker
from qc.aggregation import aggregate
from tasks.form.hit import FormHit
from tests.conftest import join

FIELDS: list[dict[str, Any]] = [
    {"id": "quality", "type": "rating", "title": "How good?", "scale": [0, 2]},
    {"id": "topic/kind", "type": "category", "title": "Topic?", "choices": ["0", "1", "2"]},
    {"id": "best", "type": "rank", "title": "Best first", "choices": ["a", "b", "c"]},
]
ITEMS = [f"i{n}" for n in range(6)]
WORKERS = ["w0", "w1", "w2", "w3"]


def truth(item_id: str) -> dict[str, Any]:
    n = int(item_id[1:])
    top = (n + 2) % 3
    return {"quality": n % 3, "topic/kind": [str((n + 1) % 3)],
            "best": [top, *(i for i in range(3) if i != top)]}  # fmt: skip


def answer(worker: str, item_id: str) -> dict[str, Any]:
    """The true answer, except w3's ratings, which are always one point off (mod 3); w3 ranks
    and picks topics as well as the others."""
    given = truth(item_id)
    if worker == "w3":
        given["quality"] = (given["quality"] + 1) % 3
    return given


def play(client: FlaskClient, auth: dict[str, str], study_id: int) -> None:
    for worker in WORKERS:
        who = join(client, auth, external_id=worker)
        while True:
            view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
            assert view.status_code == 200, view.get_json()
            data = view.get_json()
            if data.get("done"):
                break
            item_id = data["task"]["attachments"][0]["content"].removeprefix("Text of ")
            given = answer(worker, item_id)
            # A rank is sent as positions in the order this page showed its things.
            (shown,) = (f["order"] for f in data["task"]["fields"] if f["id"] == "best")
            given["best"] = [shown.index(index) for index in given["best"]]
            reply = client.post(
                f"/api/work/assignments/{data['assignment_id']}/step",
                json={"step": 0, "fields": given},
                headers=who,
            )
            assert reply.status_code == 200, reply.get_json()


def labelled_by_field(db: Database) -> dict[str, list[tuple[str, str, Hashable]]]:
    """Each field's (task, worker, label) triples, read back from the stored responses."""
    hit = FormHit()
    found: dict[str, list[tuple[str, str, Hashable]]] = {}
    with db.session() as session:
        rows = session.execute(
            select(Item.external_id, Worker.external_id, Response.answer)
            .join(Item, Item.id == Response.item_id)
            .join(Worker, Worker.id == Response.worker_id)
            .order_by(Response.id)
        ).all()
    for item_id, worker, stored in rows:
        for field, label in hit.answer_labels(stored).items():
            found.setdefault(field, []).append((f"{item_id}/{field}", f"sim:{worker}", label))
    return found


def test_each_field_of_a_form_study_is_aggregated_on_its_own(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    items = [{"id": i, "text": f"Text of {i}"} for i in ITEMS]
    gold = {"id": "g0", "kind": "gold", "text": "Text of g0",
            "expected": {"quality": 0, "topic/kind": "1"}}  # fmt: skip
    config = {"fields": FIELDS, "annotations_per_item": 4, "attention_rate": 0.0}
    study_id = make_study([*items, gold], config, hit_type="form")
    play(client, auth, study_id)
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        summary = labels.aggregate_study(session, study)
        stored = {row.method: row.data for row in session.scalars(
            select(AggregatedLabels).where(AggregatedLabels.study_id == study_id))}  # fmt: skip
    assert set(summary) == set(stored) == {"majority_vote", "dawid_skene", "mace", "ordinal_mean"}
    by_field = labelled_by_field(db)
    assert set(by_field) == {"quality", "topic/kind", "best"}
    every_item = [*ITEMS, "g0"]
    for method, data in stored.items():
        fields = ["quality"] if method == "ordinal_mean" else list(by_field)
        assert set(data["skills_by_question"]) == set(fields), method
        assert data["question_errors"] == {} and summary[method]["question_errors"] == {}
        assert set(data["labels"]) == {f"{i}/{f}" for i in every_item for f in fields}, method
        for field in fields:
            # What one model of this field's labels alone gives, to the last digit.
            alone = aggregate(method, by_field[field])
            mine = {task: label for task, label in data["labels"].items()
                    if task.endswith(f"/{field}")}  # fmt: skip
            assert mine == alone.labels, (method, field)
            assert {t: data["confidence"][t] for t in mine} == pytest.approx(alone.confidence)
            assert data["skills_by_question"][field] == pytest.approx(alone.skills)
        # The truth, each field's label in its own kind: ints, value texts, top indexes.
        for item_id in ITEMS:
            assert data["labels"][f"{item_id}/quality"] == int(item_id[1:]) % 3, method
            if method != "ordinal_mean":
                assert data["labels"][f"{item_id}/topic/kind"] == truth(item_id)["topic/kind"][0]
                assert data["labels"][f"{item_id}/best"] == truth(item_id)["best"][0]
        # g0's expected rating (0) and topic ("1") are what w0-w2 answer: right on gold.
        assert data["gold_accuracy"] == 1.0, method
        # A worker's overall skill: the per-field skills weighted by their labels in each.
        for worker, skill in data["skills"].items():
            weights = {f: sum(1 for _, w, _ in by_field[f] if w == worker) for f in fields}
            mean = sum(data["skills_by_question"][f][worker] * weights[f] for f in fields)
            assert skill == pytest.approx(mean / sum(weights.values())), (method, worker)
    # w3's ratings are always off and their ranks always right: each field's own model sees
    # it, where one model of every field would give w3 one confusion for both.
    for method in ("dawid_skene", "mace", "majority_vote"):
        skills = stored[method]["skills_by_question"]
        assert skills["best"]["sim:w3"] > 0.9, method
        assert skills["quality"]["sim:w3"] < 0.5 < skills["quality"]["sim:w0"], method
    assert stored["majority_vote"]["skills_by_question"]["quality"]["sim:w3"] == 0.0
    # The API gives both, as stored and as summarised.
    url = f"/api/studies/{study_id}/aggregations"
    posted = client.post(url, json={"methods": ["dawid_skene"]}, headers=auth)
    assert posted.status_code == 201, posted.get_json()
    assert posted.get_json()["summary"]["dawid_skene"]["question_errors"] == {}
    got = client.get(url, headers=auth)
    assert got.status_code == 200, got.get_json()
    reply = got.get_json()["aggregations"]["dawid_skene"]
    assert reply["skills_by_question"] == stored["dawid_skene"]["skills_by_question"]


def test_a_field_the_method_cannot_fit_is_named_and_the_others_still_aggregate() -> None:
    hit = FormHit()
    labelled: list[tuple[str, str, str, Hashable]] = [
        ("i1", "quality", "w1", 2), ("i1", "quality", "w2", 2), ("i2", "quality", "w1", 1),
        # The same worker labelled i1's topic twice: no model can take that.
        ("i1", "topic", "w1", "news"), ("i1", "topic", "w1", "sport"),
    ]  # fmt: skip
    fitted = labels.aggregate_per_question(hit, "dawid_skene", labelled, {"fields": FIELDS})
    assert set(fitted.errors) == {"topic"} and "twice" in fitted.errors["topic"]
    assert fitted.aggregation is not None
    assert fitted.aggregation.labels == {"i1/quality": 2, "i2/quality": 1}
    assert set(fitted.parts) == {"quality"}
    # ordinal_mean fits the study's rating fields only: the category is left out, not failed.
    ordinal = labels.aggregate_per_question(hit, "ordinal_mean", labelled, {"fields": FIELDS})
    assert ordinal.errors == {} and set(ordinal.parts) == {"quality"}
    # Nothing fits: no aggregation, every question's reason.
    broken = labels.aggregate_per_question(hit, "mace", labelled[3:], {"fields": FIELDS})
    assert broken.aggregation is None and set(broken.errors) == {"topic"}
