"""Scale's comparison and TextCollection tasks as Scale documents them, through the official
scaleapi client over real HTTP, answered by simulated workers on the worker API until the
tasks complete with the documented response shapes (the projects' studies are form studies).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import requests
from scaleapi import ScaleClient
from scaleapi.exceptions import ScaleDuplicateResource, ScaleInvalidRequest
from scaleapi.tasks import TaskReviewStatus, TaskStatus, TaskType
from sqlalchemy import select

from crowd.delivery.signed import verify_signature
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import Database, Item, ItemKind, Study
from examples.scale_rl_loop import CallbackReceiver, callback_auth_key
from tests.crowd.web.test_scale_api import Crowd, publish

# What HELM's ScaleCritiqueClient sends: category fields with numeric values, a text field.
QUESTIONS = ["Helpfulness", "Harmlessness"]
FIELDS: list[dict[str, Any]] = [
    *({"type": "category", "field_id": name, "title": name,
       "description": f"Rate the {name.lower()} of the answer",
       "choices": [{"label": str(n), "value": n} for n in range(5)],
       "min_choices": 1, "max_choices": 1} for name in QUESTIONS),
    {"type": "text", "field_id": "Keyword Feedback", "title": "Keyword Feedback",
     "description": "Say why in a few words", "max_characters": 500, "required": True},
]  # fmt: skip


@pytest.fixture
def scale(live_server: Any, api_key: str) -> ScaleClient:
    return ScaleClient(api_key, api_instance_url=f"{live_server.url}/v1")


class FormCrowd(Crowd):
    """Sim workers on the live server's worker API who send the form's fields."""

    def fill(self, name: str, study_id: int, fields: dict[str, Any]) -> dict[str, Any] | None:
        """Answer the next item with these fields; returns the page's task (None: no work)."""
        view = self.next(name, study_id)
        if view.get("done"):
            return None
        task: dict[str, Any] = view["task"]
        reply = requests.post(
            f"{self.base}/api/work/assignments/{view['assignment_id']}/step",
            json={"step": task["step"], "fields": fields, "sim_seconds": 20.0},
            headers=self.join(name),
        )
        assert reply.status_code == 200, reply.text
        return task


def one_answer_project(scale: ScaleClient, name: str, task_type: TaskType) -> int:
    """A project whose tasks each need one answer and serve no attention checks; its study."""
    created = scale.create_project(name, task_type, params={
        "crowd": {"annotations_per_item": 1, "attention_rate": 0.0}})  # fmt: skip
    study_id: int = created.as_dict()["study_id"]
    return study_id


def helm_task(scale: ScaleClient, batch: str, output: str, respondents: int = 2) -> Any:
    """A task as HELM's client creates it (its unique_id is a hash of the request)."""
    attachments = [{"type": "text", "content": f"Answer the question.\n\n{output}\n"}]
    unique_id = hashlib.sha512(f"{batch}/{output}".encode()).hexdigest()
    try:
        return scale.create_task(
            TaskType.TextCollection, batch=batch, unique_id=unique_id,
            instruction="Evaluate the AI model generated output following the instructions "
            "below", attachments=attachments, responses_required=respondents, fields=FIELDS,
        )  # fmt: skip
    except ScaleDuplicateResource:
        task = scale.get_task(unique_id)
        assert task.params["attachments"] == attachments
        return task


def helm_answers(task: Any) -> list[dict[str, Any]]:
    """What HELM's _get_worker_responses makes of a completed task."""
    fields = task.params["fields"]
    out = []
    for raw in task.response["responses"]:
        answers: dict[str, Any] = {}
        for i, (name, given) in enumerate(raw.items()):
            if fields[i]["type"] == "category":
                assert isinstance(given, list) and len(given) == 1 and isinstance(given[0], str)
                answers[name] = fields[i]["choices"][int(given[0])]["label"]
            else:
                answers[name] = given
        out.append(answers)
    return out


def test_textcollection_tasks_complete_with_every_respondents_answers(
    scale: ScaleClient, live_server: Any, api_key: str, settings: Settings, db: Database
) -> None:
    project = scale.create_project("helm", TaskType.TextCollection, rapid=True, params={})
    assert (project.type, project.as_dict()["rapid"]) == ("textcollection", True)
    study_id = project.as_dict()["study_id"]
    with pytest.raises(ScaleDuplicateResource):
        scale.create_project("helm", TaskType.TextCollection, rapid=True, params={})
    assert scale.get_project("helm").type == "textcollection"
    batch = scale.create_batch("helm", "critique", calibration_batch=False,
                               self_label_batch=False)  # fmt: skip
    assert (batch.status, batch.project) == ("staging", "helm")
    with pytest.raises(ScaleDuplicateResource):
        scale.create_batch("helm", "critique")
    assert scale.get_batch("critique").status == "staging"
    task = helm_task(scale, "critique", "Paris is the capital of France.")
    assert task.status == "pending" and task.type == "textcollection"
    assert task.params["fields"] == FIELDS and task.params["responses_required"] == 2
    assert helm_task(scale, "critique", "Paris is the capital of France.").id == task.id
    # The same unique_id with another request: a 409, then the task by its unique_id.
    with pytest.raises(ScaleDuplicateResource):
        scale.create_task(
            TaskType.TextCollection,
            batch="critique",
            unique_id=task.unique_id,
            attachments=[{"type": "text", "content": "other"}],
            fields=FIELDS,
        )
    assert scale.get_task(task.unique_id).id == task.id
    other = helm_task(scale, "critique", "Lyon is the capital of France.", respondents=1)
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None and study.hit_type == "form"
        item = session.scalar(select(Item).where(Item.external_id == task.id))
        assert item is not None and item.target == 0  # held with its batch
        assert [field["id"] for field in item.content["fields"]] == [
            *QUESTIONS, "Keyword Feedback"]  # fmt: skip
    publish(live_server.url, api_key, study_id)
    crowd = FormCrowd(live_server.url, api_key)
    assert crowd.next("w1", study_id).get("done")  # nothing before finalize
    scale.finalize_batch("critique")
    shown = []
    for worker, (helpful, harmless, why) in {"w1": (3, 4, "clear"), "w2": (4, 4, "right"),
                                              "w3": (0, 1, "wrong")}.items():  # fmt: skip
        for _ in range(2):
            page = crowd.fill(worker, study_id, {
                "Helpfulness": [str(helpful)], "Harmlessness": [harmless],
                "Keyword Feedback": f"  {why} "})  # fmt: skip
            if page is not None:
                shown.append(page["attachments"][-1]["content"])
        run_worker(settings, burst=True)
    # responses_required: 2 workers answer the first task, 1 the second; then nothing is left.
    assert sorted(shown).count("Answer the question.\n\nParis is the capital of France.\n") == 2
    assert len(shown) == 3
    done = scale.get_task(task.id)
    assert done.status == TaskStatus.Completed.value
    assert len(done.response["responses"]) == 2
    for respondent in done.response["responses"]:
        assert list(respondent) == [*QUESTIONS, "Keyword Feedback"]
    assert set(map(str, helm_answers(done))) <= {
        str({"Helpfulness": "3", "Harmlessness": "4", "Keyword Feedback": "clear"}),
        str({"Helpfulness": "4", "Harmlessness": "4", "Keyword Feedback": "right"}),
        str({"Helpfulness": "0", "Harmlessness": "1", "Keyword Feedback": "wrong"}),
    }
    assert done.response["annotations"]["Harmlessness"] in (["4"], ["1"])
    assert len(scale.get_task(other.id).response["responses"]) == 1
    assert scale.batch_status("critique")["completed"] == 2
    assert scale.get_batch("critique").status == "completed"
    scale.audit_task(task.id, True)
    assert scale.get_tasks_count(project_name="helm", review_status=TaskReviewStatus.Accepted) == 1
    assert [
        t.id for t in scale.get_tasks(project_name="helm", task_type=TaskType.TextCollection)
    ] == [task.id, other.id]


def test_textcollection_requests_say_what_to_fix(scale: ScaleClient) -> None:
    scale.create_project("forms", TaskType.TextCollection)
    base: dict[str, Any] = {"project": "forms", "fields": FIELDS,
                            "attachments": [{"type": "text", "content": "x"}]}  # fmt: skip
    changes: list[tuple[dict[str, Any], str]] = [
        ({"fields": [FIELDS[0], FIELDS[0]]}, "used twice"),
        ({"fields": [{**FIELDS[2], "type": "date"}]}, "fields"),
        ({"attachments": [{"type": "video", "content": "x"}]}, "attachments"),
        ({"attachments": [{"type": "image", "content": "not a url"}]}, "attachments"),
        ({"responses_required": 0}, "responses_required"),
        ({"fields": [{**FIELDS[0], "choices": [{"label": "a", "value": 1}]}]}, "choices"),
    ]
    for change, message in changes:
        with pytest.raises(ScaleInvalidRequest, match=message):
            scale.create_task(TaskType.TextCollection, **{**base, **change})
    with pytest.raises(ScaleInvalidRequest, match="takes textcollection tasks"):
        scale.create_task(TaskType.Categorization, project="forms", attachment="x",
                          categories=["a", "b"])  # fmt: skip


def test_a_comparison_answers_with_one_of_its_choices(
    scale: ScaleClient, live_server: Any, api_key: str, settings: Settings, db: Database
) -> None:
    created = scale.create_project("jokes", TaskType.Comparison, params={
        "instruction": "Read the jokes.", "crowd": {"annotations_per_item": 2}})  # fmt: skip
    study_id = created.as_dict()["study_id"]
    jokes = [f"joke number {n}" for n in range(5)]
    with CallbackReceiver() as receiver:
        task = scale.create_task(
            TaskType.Comparison, project="jokes", instruction="How many jokes are funny?",
            attachments=jokes, attachment_type="text", choices=["1", "2", "3", "4"],
            fields={"why": "Which ones, and why?"}, callback_url=receiver.url,
        )  # fmt: skip
        assert task.params["choices"] == ["1", "2", "3", "4"]
        canceled = scale.create_task(TaskType.Comparison, project="jokes", instruction="Cat?",
                                     attachments=["https://example.org/a.png",
                                                  "https://example.org/b.png"],
                                     attachment_type="image", choices=["yes", "no"])  # fmt: skip
        assert scale.cancel_task(canceled.id).status == "canceled"
        publish(live_server.url, api_key, study_id)
        crowd = FormCrowd(live_server.url, api_key)
        page = crowd.fill("w1", study_id, {"choice": ["3"], "why": "the first three"})
        assert page is not None
        assert [a["content"] for a in page["attachments"]] == jokes
        assert page["fields"][0]["title"] == "How many jokes are funny?"
        run_worker(settings, burst=True)
        assert scale.get_task(task.id).status == "pending"
        crowd.fill("w2", study_id, {"choice": ["3"], "why": "1, 2 and 4"})
        assert crowd.fill("w3", study_id, {"choice": ["1"], "why": "none"}) is None
        run_worker(settings, burst=True)
    done = scale.get_task(task.id)
    assert done.status == "completed"
    assert done.response == {"choice": "3", "votes": {"1": 0, "2": 0, "3": 2, "4": 0},
                             "responses": 2, "agreement": 1.0,
                             "fields": {"why": "the first three"}}  # fmt: skip
    (callback,) = receiver.received
    assert callback.payload["response"] == done.response
    assert callback.payload["task"]["response"] == done.response
    scale.audit_task(task.id, False, "4 are funny")
    assert scale.get_task(task.id).customer_review_status == "rejected"
    assert scale.get_tasks_count(project_name="jokes", status=TaskStatus.Canceled) == 1


def test_evaluation_tasks_wait_in_their_batch_until_it_is_finalized(
    scale: ScaleClient, live_server: Any, api_key: str, db: Database
) -> None:
    one_answer_project(scale, "jokes", TaskType.Comparison)
    scale.create_project(
        "best",
        TaskType.Comparison,
        params={"crowd": {"pick": "attachment", "annotations_per_item": 1, "attention_rate": 0.0}},
    )
    scale.create_project("forms", TaskType.TextCollection)
    for name in ("jokes", "best", "forms"):
        scale.create_batch(name, f"{name}-1")
    gold = [
        scale.create_evaluation_task(
            TaskType.Comparison, batch="jokes-1", instruction="Funny?",
            attachments=["a joke", "another"], choices=["yes", "no"],
            expected_response={"choice": "yes"}),
        scale.create_evaluation_task(
            TaskType.Comparison, batch="best-1", instruction="Which is kind?",
            attachments=["a kind reply", "a rude reply"], expected_response={"choice": 0}),
        scale.create_evaluation_task(
            TaskType.TextCollection, batch="forms-1",
            attachments=[{"type": "text", "content": "x"}], fields=FIELDS,
            expected_response={"Helpfulness": 4}),
        scale.create_training_task(
            TaskType.Comparison, batch="jokes-1", instruction="Funny?",
            attachments=["a pun", "a riddle"], choices=["yes", "no"],
            expected_response={"choice": 1}),
    ]  # fmt: skip
    assert [task.as_dict()["batch"] for task in gold] == ["jokes-1", "best-1", "forms-1",
                                                          "jokes-1"]  # fmt: skip

    def items() -> dict[str, tuple[str, int | None, dict[str, Any]]]:
        with db.session() as session:
            rows = session.scalars(select(Item).where(Item.external_id.in_(
                [task.id for task in gold]))).all()  # fmt: skip
            return {row.external_id: (str(row.kind), row.target, row.expected) for row in rows}

    assert {kind for kind, target, _ in items().values()} == {ItemKind.REAL}
    assert {target for _, target, _ in items().values()} == {0}
    for name in ("jokes", "best", "forms"):
        scale.finalize_batch(f"{name}-1")
    after = items()
    assert [after[task.id][0] for task in gold] == ["gold", "gold", "gold", "training"]
    assert after[gold[0].id][2]["expected"] == {"choice": ["yes"]}
    assert after[gold[1].id][2] == {"best": 0}
    assert after[gold[2].id][2]["expected"] == {"Helpfulness": ["4"]}
    assert scale.get_task(gold[2].id).expected_response == {"Helpfulness": 4}
    assert scale.get_tasks_count(project_name="jokes") == 0  # not customer tasks


def test_categorization_tasks_are_listed_canceled_and_audited(
    scale: ScaleClient, live_server: Any, api_key: str, settings: Settings
) -> None:
    study_id = one_answer_project(scale, "labels", TaskType.Categorization)
    tasks = [scale.create_task(TaskType.Categorization, project="labels", attachment=text,
                               categories=["red", "blue"], responses_required=1)
             for text in ("tomato", "sky")]  # fmt: skip
    assert [t.id for t in scale.get_tasks(project_name="labels")] == [t.id for t in tasks]
    assert scale.cancel_task(tasks[1].id).status == "canceled"
    publish(live_server.url, api_key, study_id)
    crowd = Crowd(live_server.url, api_key)
    assert crowd.answer("w1", study_id, pick="red") == "tomato"
    assert crowd.answer("w2", study_id) is None  # the canceled task is not served
    run_worker(settings, burst=True)
    done = scale.get_task(tasks[0].id)
    assert done.response["category"] == "red" and done.params["responses_required"] == 1
    scale.audit_task(done.id, True, "right")
    assert scale.get_task(done.id).customer_review_status == "accepted"
    assert [t.id for t in scale.get_tasks(project_name="labels", status=TaskStatus.Canceled)] == [
        tasks[1].id]  # fmt: skip


def test_a_comparison_with_only_fields_answers_with_them_alone(
    scale: ScaleClient, live_server: Any, api_key: str, settings: Settings
) -> None:
    study_id = one_answer_project(scale, "notes", TaskType.Comparison)
    with CallbackReceiver() as receiver:
        task = scale.create_task(
            TaskType.Comparison,
            project="notes",
            instruction="Compare.",
            attachments=["a text", "another"],
            attachment_type="text",
            fields={"why": "What differs?"},
            callback_url=receiver.url,
        )
        publish(live_server.url, api_key, study_id)
        page = FormCrowd(live_server.url, api_key).fill("w1", study_id, {"why": "the length"})
        assert page is not None and [f["id"] for f in page["fields"]] == ["why"]
        run_worker(settings, burst=True)
    # Scale's comparison response without choices: the fields, and no choice, votes or
    # agreement keys at all (not nulls), in the task, in listings and in the callback.
    expected = {"fields": {"why": "the length"}, "responses": 1}
    assert scale.get_task(task.id).response == expected
    (listed,) = scale.get_tasks(project_name="notes")
    assert listed.response == expected
    (callback,) = receiver.received
    assert callback.payload["response"] == expected == callback.payload["task"]["response"]
    raw = requests.get(f"{live_server.url}/v1/task/{task.id}", auth=(api_key, ""))
    assert '"choice"' not in raw.text and "null" not in raw.text.split('"response"')[1]
    # And so it is described: optional keys, never null.
    spec = requests.get(f"{live_server.url}/openapi.json").json()
    described = spec["components"]["schemas"]["ChoiceResponse"]
    assert described["required"] == ["responses"]
    for key in ("choice", "votes", "agreement"):
        assert "null" not in str(described["properties"][key]), key
        assert "default" not in described["properties"][key], key
    assert described["properties"]["fields"]["type"] == "object"


def test_a_textcollection_callback_lists_each_respondents_answers_in_field_order(
    scale: ScaleClient, live_server: Any, api_key: str, settings: Settings
) -> None:
    created = scale.create_project("helm", TaskType.TextCollection, params={
        "crowd": {"attention_rate": 0.0}})  # fmt: skip
    study_id = created.as_dict()["study_id"]
    order = [field["field_id"] for field in FIELDS]
    assert order != sorted(order)  # sorted keys would show
    with CallbackReceiver() as receiver:
        task = scale.create_task(TaskType.TextCollection, project="helm", callback_url=receiver.url,
                                 attachments=[{"type": "text", "content": "An answer."}],
                                 fields=FIELDS, responses_required=2)  # fmt: skip
        publish(live_server.url, api_key, study_id)
        crowd = FormCrowd(live_server.url, api_key)
        for worker in ("w1", "w2"):
            crowd.fill(worker, study_id, {"Helpfulness": ["3"], "Harmlessness": ["4"],
                                          "Keyword Feedback": f"said by {worker}"})  # fmt: skip
        run_worker(settings, burst=True)
    (callback,) = receiver.received
    key = callback_auth_key(live_server.url, api_key)
    assert verify_signature(key, callback.body, callback.headers["X-Crowd-Signature"])
    sent = json.loads(callback.body)  # the bytes signed, as sent
    for response in (sent["response"], sent["task"]["response"]):
        assert [list(answers) for answers in response["responses"]] == [order, order]
        assert list(response["annotations"]) == order
    assert sent["response"]["responses"][1]["Keyword Feedback"] == "said by w2"
    assert sent["task"]["task_id"] == task.id


def test_a_canceled_textcollection_task_is_listed_as_canceled_and_never_served(
    scale: ScaleClient, live_server: Any, api_key: str
) -> None:
    study_id = one_answer_project(scale, "forms", TaskType.TextCollection)
    tasks = [scale.create_task(TaskType.TextCollection, project="forms", fields=FIELDS,
                               attachments=[{"type": "text", "content": text}])
             for text in ("first answer", "second answer")]  # fmt: skip
    assert scale.cancel_task(tasks[0].id).status == "canceled"
    assert scale.get_task(tasks[0].id).status == "canceled"
    with pytest.raises(ScaleInvalidRequest):  # a canceled task has nothing to audit
        scale.audit_task(tasks[0].id, True)
    assert [t.id for t in scale.get_tasks(project_name="forms", status=TaskStatus.Canceled)] == [
        tasks[0].id]  # fmt: skip
    publish(live_server.url, api_key, study_id)
    crowd = FormCrowd(live_server.url, api_key)
    answer = {"Helpfulness": ["3"], "Harmlessness": ["4"], "Keyword Feedback": "fine"}
    page = crowd.fill("w1", study_id, answer)
    assert page is not None and page["attachments"][-1]["content"] == "second answer"
    assert crowd.fill("w2", study_id, answer) is None  # the canceled one is not served
