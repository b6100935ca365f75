"""Quality control of a form study through the HTTP API: training items answered with what
was expected (and only once the answer is stored), gold and real items with the same thanks,
the qualification gate after training, and the gold rule that stops a careless worker."""

from __future__ import annotations

import json
from typing import Any

from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.quality import standing as quality
from crowd.storage import AuditEntry, Database, Qualification, Serving, Study, StudyWorker, Worker
from tests.conftest import join
from tests.tasks.form_helpers import sample_config
from tests.tasks.test_form_flow import create, next_view, send
from tests.tasks.test_form_flow import keys as json_keys

THANKS = {"message": "Thank you! Your answers are saved."}
RIGHT_ORDER = [2, 0, 1]  # clarity > accuracy > brevity, as declared indexes


def form_item(item_id: str, kind: str = "real", **extra: Any) -> dict[str, Any]:
    return {
        "id": item_id,
        "kind": kind,
        "attachments": [
            {"type": "text", "content": f"Summary {item_id}."},
            {"type": "text", "content": f"Source {item_id}."},
        ],
        **extra,
    }


def training(item_id: str) -> dict[str, Any]:
    return form_item(
        item_id,
        "training",
        expected={"faithfulness": 4, "problems": ["missing"], "strengths": RIGHT_ORDER},
        tolerance={"faithfulness": 1},
    )


def study_config(**qc: Any) -> dict[str, Any]:
    return {**sample_config(), "annotations_per_item": 1, "attention_rate": 0.0, "qc": qc}


def answer(
    client: FlaskClient,
    who: dict[str, str],
    view: dict[str, Any],
    fields: dict[str, Any],
    sim_seconds: float | None = None,
) -> dict[str, Any]:
    """Send a form answer, the rank given as declared indexes and sent as shown positions
    (`sim_seconds`: the simulated time it took, to keep clear of the too-fast rule)."""
    sent = dict(fields)
    if "strengths" in sent:
        order = view["task"]["fields"][3]["order"]
        sent["strengths"] = [order.index(index) for index in sent["strengths"]]
    timed = {} if sim_seconds is None else {"sim_seconds": sim_seconds}
    reply = send(client, who, view, {"fields": sent, **timed})
    assert reply.status_code == 200, reply.get_json()
    return dict(reply.get_json())


def worker_row(db: Database, study_id: int, external_id: str) -> StudyWorker:
    with db.session() as session:
        row = session.scalar(
            select(StudyWorker)
            .join(Worker, Worker.id == StudyWorker.worker_id)
            .where(StudyWorker.study_id == study_id, Worker.external_id == external_id)
        )
        assert row is not None
        session.expunge(row)
        return row


def test_training_feedback_says_what_was_expected_once_the_answer_is_stored(
    client: FlaskClient, auth: dict[str, str]
) -> None:
    # Gold at every chance: training first, then gold, then the real item.
    items = [
        form_item("real1"),
        form_item("gold1", "gold", expected={"faithfulness": 5, "problems": []}),
        training("train1"),
    ]
    study_id = create(client, auth, study_config(gold={"min_rate": 1.0, "max_rate": 1.0}), items)
    who = join(client, auth)
    view = next_view(client, who, study_id)
    assert view["task"]["attachments"][0]["content"] == "Summary train1."
    # Before the answer: nothing of what is expected, on the view or on a reload.
    reloaded = client.get(f"/api/work/assignments/{view['assignment_id']}", headers=who)
    for shown in (view, reloaded.get_json()):
        assert "feedback" not in shown and not json_keys(shown) & {"expected", "tolerance"}
        assert "missing" not in json.dumps(shown["task"]["fields"][3])
    given = {"faithfulness": 2, "problems": ["missing", "unclear"], "strengths": [0, 1, 2]}
    feedback = answer(client, who, view, given)["feedback"]
    assert feedback["training"] is True and feedback["correct"] is False
    assert feedback["message"].startswith("Not quite: 3 of 3 answers differ")
    assert feedback["fields"] == [
        {
            "id": "faithfulness",
            "title": "How faithful is the summary to the source?",
            "expected": "4/5, give or take 1",
            "given": "2/5",
            "matched": False,
        },
        {
            "id": "problems",
            "title": feedback["fields"][1]["title"],
            "expected": "It leaves out a key point",
            "given": "It leaves out a key point, It is hard to follow",
            "matched": False,
        },
        {
            "id": "strengths",
            "title": feedback["fields"][2]["title"],
            "expected": "Clarity > Accuracy > Brevity",
            "given": "Accuracy > Brevity > Clarity",
            "matched": False,
        },
    ]
    # The same feedback on a reload of the answered assignment.
    again = client.get(f"/api/work/assignments/{view['assignment_id']}", headers=who)
    assert again.get_json()["feedback"] == feedback
    # Gold and real items: the plain thanks, whether the answer matched or not.
    for expected_text in ("Summary gold1.", "Summary real1."):
        view = next_view(client, who, study_id)
        assert view["task"]["attachments"][0]["content"] == expected_text
        reply = answer(
            client, who, view, {"faithfulness": 5, "problems": [], "strengths": [0, 1, 2]}
        )
        assert reply["feedback"] == THANKS
    assert next_view(client, who, study_id)["done"] is True


def test_a_right_training_answer_is_told_so(client: FlaskClient, auth: dict[str, str]) -> None:
    study_id = create(client, auth, study_config(), [form_item("real1"), training("train1")])
    who = join(client, auth)
    view = next_view(client, who, study_id)
    right = {"faithfulness": 5, "problems": ["missing"], "strengths": RIGHT_ORDER}
    feedback = answer(client, who, view, right)["feedback"]
    assert feedback["correct"] is True and feedback["message"].startswith("Right")
    assert [result["matched"] for result in feedback["fields"]] == [True, True, True]
    assert feedback["fields"][0]["given"] == "5/5"


def test_the_qualification_gate_stops_those_who_fail_the_form_training(
    client: FlaskClient, auth: dict[str, str], db: Database
) -> None:
    items = [form_item("real1"), form_item("real2"), training("train1"), training("train2")]
    study_id = create(client, auth, study_config(qualification={"min_accuracy": 0.8}), items)
    right = {"faithfulness": 4, "problems": ["missing"], "strengths": RIGHT_ORDER}

    failer = join(client, auth, external_id="failer")
    for wrong in ({**right, "strengths": [0, 1, 2]}, {**right, "faithfulness": 1}):
        view = next_view(client, failer, study_id)
        assert view["task"]["attachments"][0]["content"].startswith("Summary train")
        assert answer(client, failer, view, wrong)["feedback"]["training"] is True
    # Two of three fields right on both: accuracy 0.67 < 0.8, so no real item.
    assert next_view(client, failer, study_id)["done"] is True
    row = worker_row(db, study_id, "failer")
    assert row.qualification == Qualification.FAILED and row.serving == Serving.STOPPED
    with db.session() as session:
        entry = session.scalars(
            select(AuditEntry).where(AuditEntry.worker_id == row.worker_id)
        ).one()
        assert entry.action == "qualification_failed"
        assert entry.details == {"accuracy": 0.6667, "training_items": 2}

    passer = join(client, auth, external_id="passer")
    for _ in range(2):
        view = next_view(client, passer, study_id)
        assert view["task"]["attachments"][0]["content"].startswith("Summary train")
        assert answer(client, passer, view, right)["feedback"]["correct"] is True
    view = next_view(client, passer, study_id)
    assert view["task"]["attachments"][0]["content"] in ("Summary real1.", "Summary real2.")
    assert worker_row(db, study_id, "passer").qualification == Qualification.PASSED


def test_the_gold_rule_stops_a_worker_who_misses_the_form_gold(
    client: FlaskClient, auth: dict[str, str], db: Database
) -> None:
    gold = {"faithfulness": 5, "problems": []}
    items = [form_item(f"r{n}") for n in range(4)]
    items += [form_item(f"g{n}", "gold", expected=gold) for n in range(6)]
    study_id = create(client, auth, study_config(gold={"min_rate": 1.0, "max_rate": 1.0}), items)
    who = join(client, auth, external_id="careless")
    for _ in range(6):  # the gold rule acts at 0.98: 0.984 after five misses
        view = next_view(client, who, study_id)
        assert view["task"]["attachments"][0]["content"].startswith("Summary g")
        wrong = {"faithfulness": 1, "problems": ["unclear"], "strengths": [0, 1, 2]}
        assert answer(client, who, view, wrong)["feedback"] == THANKS
    row = worker_row(db, study_id, "careless")
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        quality.refresh_standing(session, study, row.worker_id)
    row = worker_row(db, study_id, "careless")
    assert row.serving == Serving.STOPPED
    assert row.excluded_by == "rule:gold_below_threshold"
    assert row.evidence["gold_n"] == 6 and row.evidence["gold_accuracy"] == 0.0
    assert next_view(client, who, study_id)["done"] is True
