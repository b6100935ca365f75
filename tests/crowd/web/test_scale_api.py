"""The Scale-compatible /v1 API, driven by the official scaleapi client over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from flask import Flask
from scaleapi import ScaleClient
from scaleapi.exceptions import (
    ScaleDuplicateResource,
    ScaleInvalidRequest,
    ScaleResourceNotFound,
    ScaleUnauthorized,
)
from scaleapi.tasks import TaskReviewStatus, TaskStatus, TaskType
from sqlalchemy import select

from crowd.accounts import create_api_key
from crowd.queue.runner import run_worker
from crowd.settings import Settings
from crowd.storage import Database, Delivery, Item, ItemKind, Study
from crowd.web.schemas.scale_replies import ScaleError

CANDIDATES = ["a calm reply", "a rude reply", "a vivid reply", "a dull reply"]


@pytest.fixture
def scale(live_server: Any, api_key: str) -> ScaleClient:
    return ScaleClient(api_key, api_instance_url=f"{live_server.url}/v1")


@pytest.fixture
def http(live_server: Any, api_key: str) -> Iterator[Any]:
    """Plain requests to the live server, with the key as scaleapi sends it (Basic auth)."""

    class Http:
        base = live_server.url

        def post(self, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
            return requests.post(self.base + path, json=body, auth=(api_key, ""), **kwargs)

        def get(self, path: str, **kwargs: Any) -> requests.Response:
            return requests.get(self.base + path, auth=(api_key, ""), **kwargs)

    yield Http()


def comparison(scale: ScaleClient, project: str = "rl", n: int = 0, **extra: Any) -> Any:
    fields: dict[str, Any] = {
        "project": project,
        "instruction": f"Query number {n}: say something",
        "attachment_type": "text",
        "attachments": [f"{text} {n}" for text in CANDIDATES],
        **extra,
    }
    return scale.create_task(TaskType.Comparison, **fields)


def project(scale: ScaleClient, name: str = "rl", kind: TaskType = TaskType.Comparison,
            **crowd: Any) -> Any:  # fmt: skip
    """A project; a comparison project is best of K (pick the best attachment) unless
    pick=None is given."""
    pick = {"pick": "attachment"} if kind == TaskType.Comparison else {}
    config = {"annotations_per_item": 1, "attention_rate": 0.0, **pick, **crowd}
    config = {key: value for key, value in config.items() if value is not None}
    params = {"instruction": "Pick the best reply.", "crowd": config}
    return scale.create_project(name, kind, params=params)


def item_of(db: Database, task_id: str) -> Item:
    with db.session() as session:
        item = session.scalar(select(Item).where(Item.external_id == task_id))
        assert item is not None
        session.expunge(item)
        return item


class Crowd:
    """Sim workers answering the live server's worker API: join, next, pick a position."""

    def __init__(self, base: str, api_key: str) -> None:
        self.base, self.api_key = base, api_key
        self.tokens: dict[str, str] = {}

    def join(self, name: str) -> dict[str, str]:
        if name not in self.tokens:
            reply = requests.post(f"{self.base}/api/work/join",
                                  json={"provider": "sim", "external_id": name},
                                  headers={"Authorization": f"Bearer {self.api_key}"})  # fmt: skip
            assert reply.status_code == 201, reply.text
            self.tokens[name] = reply.json()["worker_token"]
        return {"X-Crowd-Worker": self.tokens[name]}

    def next(self, name: str, study_id: int) -> dict[str, Any]:
        reply = requests.post(f"{self.base}/api/work/studies/{study_id}/next", json={},
                              headers=self.join(name))  # fmt: skip
        assert reply.status_code in (200, 201), reply.text
        data: dict[str, Any] = reply.json()
        return data

    def answer(self, name: str, study_id: int, pick: str | None = None) -> str | None:
        """Answer the next item (the candidate containing `pick`, else the first shown)."""
        view = self.next(name, study_id)
        if view.get("done"):
            return None
        task = view["task"]
        shown = task["candidates"]
        position = next((i for i, t in enumerate(shown) if pick and pick in t), 0)
        reply = requests.post(
            f"{self.base}/api/work/assignments/{view['assignment_id']}/step",
            json={"step": task["step"], "choice": position, "sim_seconds": 20.0},
            headers=self.join(name),
        )
        assert reply.status_code == 200, reply.text
        return str(task["query"])


def publish(base: str, api_key: str, study_id: int) -> None:
    reply = requests.post(f"{base}/api/studies/{study_id}/publish", json={"providers": ["sim"]},
                          headers={"Authorization": f"Bearer {api_key}"})  # fmt: skip
    assert reply.status_code == 200, reply.text


def test_projects_are_studies(scale: ScaleClient, db: Database) -> None:
    created = project(scale, "rl", annotations_per_item=3)
    assert (created.name, created.type) == ("rl", "comparison")
    assert created.instruction == "Pick the best reply."
    study_id = created.as_dict()["study_id"]
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None and study.hit_type == "comparison"
        assert study.config["annotations_per_item"] == 3
        assert study.config["instructions"] == "Pick the best reply."
    assert scale.get_project("rl").as_dict()["study_id"] == study_id
    project(scale, "labels", TaskType.Categorization)
    assert [p.name for p in scale.projects()] == ["rl", "labels"]
    with pytest.raises(ScaleDuplicateResource):
        project(scale, "rl")
    with pytest.raises(ScaleResourceNotFound):
        scale.get_project("nope")
    with pytest.raises(ScaleInvalidRequest, match="not available|must be one of"):
        scale.create_project("boxes", TaskType.ImageAnnotation)
    with pytest.raises(ScaleInvalidRequest, match="annotations_per_item"):
        project(scale, "bad", annotations_per_item=0)
    with pytest.raises(ScaleInvalidRequest, match="params.colour: unknown field"):
        scale.create_project("odd", TaskType.Comparison, params={"colour": "red"})


def test_a_comparison_task_becomes_an_item(scale: ScaleClient, db: Database) -> None:
    project(scale)
    task = comparison(scale, metadata={"policies": ["a", "a", "b", "b"], "step": 7},
                      tags=["x", "y"], choices=["A", "B", "C", "D"],
                      callback_url="http://127.0.0.1:9/cb")  # fmt: skip
    assert task.status == "pending" and task.type == "comparison"
    assert task.params["attachments"][2] == "a vivid reply 0"
    assert task.metadata["step"] == 7 and task.tags == ["x", "y"]
    again = scale.get_task(task.id)
    assert again.as_dict() == task.as_dict()
    item = item_of(db, task.id)
    assert item.kind == ItemKind.REAL
    assert item.content == {"query": "Query number 0: say something",
                            "candidates": [f"{t} 0" for t in CANDIDATES]}  # fmt: skip
    assert item.meta["policies"] == ["a", "a", "b", "b"]
    with pytest.raises(ScaleResourceNotFound):
        scale.get_task("0" * 24)


def test_a_categorization_task_becomes_a_pick_of_its_categories(
    scale: ScaleClient, db: Database
) -> None:
    project(scale, "labels", TaskType.Categorization)
    task = scale.create_task(TaskType.Categorization, project="labels", attachment="tomato",
                             attachment_type="text", categories=["red", "blue"],
                             instruction="Is this object red or blue?")  # fmt: skip
    assert task.params == {"attachment_type": "text", "attachment": "tomato",
                           "categories": ["red", "blue"]}  # fmt: skip
    item = item_of(db, task.id)
    assert item.content == {"query": "Is this object red or blue?\n\ntomato",
                            "candidates": ["red", "blue"]}  # fmt: skip
    with pytest.raises(ScaleInvalidRequest, match="takes categorization tasks"):
        comparison(scale, "labels")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"attachments": ["only one"]}, "attachments"),
        ({"attachments": [f"c{i}" for i in range(9)]}, "at most 8 items"),
        ({"attachments": ["same", "same"]}, "must all differ"),
        ({"attachment_type": "image"}, "attachment_type"),
        ({"fields": {"why": "Why?"}}, "fields"),
        ({"instruction": None}, "instruction"),
        ({"colour": "red"}, "colour: unknown field"),
        ({"choices": ["A", "B"]}, "choices"),
        ({"callback_url": "me@example.org"}, "callback_url"),
        ({"tags": "x" * 300}, "tags"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"project": None}, "project"),
    ],
)
def test_bad_task_requests_say_what_to_fix(
    scale: ScaleClient, change: dict[str, Any], message: str
) -> None:
    project(scale)
    fields: dict[str, Any] = {"project": "rl", "instruction": "x", "attachments": CANDIDATES,
                              **change}  # fmt: skip
    with pytest.raises(ScaleInvalidRequest, match=message):
        scale.create_task(TaskType.Comparison, **{k: v for k, v in fields.items()
                                                  if v is not None})  # fmt: skip


def test_unique_id_gives_the_same_task_or_a_conflict(scale: ScaleClient, db: Database) -> None:
    project(scale)
    first = comparison(scale, unique_id="x-1")
    assert comparison(scale, unique_id="x-1").id == first.id
    with pytest.raises(ScaleDuplicateResource, match=first.id):
        comparison(scale, n=2, unique_id="x-1")
    assert [t.id for t in scale.tasks(project="rl", unique_id="x-1")] == [first.id]
    scale.cancel_task(first.id, clear_unique_id=True)
    second = comparison(scale, n=2, unique_id="x-1")
    assert second.id != first.id and scale.get_task(first.id).as_dict().get("unique_id") is None
    with db.session() as session:
        assert len(session.scalars(select(Item)).all()) == 2


def test_an_idempotency_key_replays_the_first_reply(http: Any, db: Database) -> None:
    body = {
        "name": "rl",
        "type": "comparison",
        "params": {"crowd": {"attention_rate": 0.0, "pick": "attachment"}},
    }
    assert http.post("/v1/projects", body).status_code == 200
    task = {"project": "rl", "instruction": "x", "attachments": CANDIDATES}
    key = {"Idempotency-Key": "k-1"}
    first = http.post("/v1/task/comparison", task, headers=key)
    again = http.post("/v1/task/comparison", task, headers=key)
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    other = http.post("/v1/task/comparison", {**task, "instruction": "y"}, headers=key)
    assert other.status_code == 409 and "Idempotency-Key" in other.json()["error"]
    assert http.post("/v1/task/comparison", task, headers={"Idempotency-Key": "k-2"}).json()[
        "task_id"] != first.json()["task_id"]  # fmt: skip
    with db.session() as session:
        assert len(session.scalars(select(Item)).all()) == 2


def test_authentication(live_server: Any, db: Database) -> None:
    url = f"{live_server.url}/v1"
    for key in ("crowd_000000000000_nope", "not-a-key"):
        with pytest.raises(ScaleUnauthorized):
            ScaleClient(key, api_instance_url=url).projects()
    reply = requests.get(f"{url}/projects")
    assert reply.status_code == 401 and reply.json()["status_code"] == 401
    assert "Basic" in reply.headers["WWW-Authenticate"]
    with db.session() as session:
        other = create_api_key(session, "someone else")
    ScaleClient(other, api_instance_url=url).create_project("theirs", TaskType.Comparison)
    mine_key = None
    with db.session() as session:
        mine_key = create_api_key(session, "me")
    with pytest.raises(ScaleResourceNotFound):
        ScaleClient(mine_key, api_instance_url=url).get_project("theirs")


def test_listing_filters_and_next_token_paging(scale: ScaleClient) -> None:
    project(scale, "rl")
    project(scale, "other")
    start = datetime.now(UTC) - timedelta(seconds=1)
    ids = [comparison(scale, n=n, tags=["even"] if n % 2 == 0 else ["odd"],
                      unique_id=f"u{n}").id for n in range(5)]  # fmt: skip
    comparison(scale, "other", n=9)
    scale.create_evaluation_task(
        TaskType.Comparison,
        project="rl",
        instruction="gold",
        attachments=CANDIDATES,
        expected_response={"choice": 1},
    )
    pages, token = [], None
    while True:
        page = scale.tasks(project="rl", limit=2, next_token=token)
        assert page.total == 5 and page.limit == 2
        pages.append([task.id for task in page.docs])
        if not page.has_more:
            break
        token = page.next_token
    assert pages == [ids[:2], ids[2:4], ids[4:]]
    assert [t.id for t in scale.get_tasks(project_name="rl", limit=2)] == ids
    assert [t.id for t in scale.get_tasks(project_name="rl", tags=["even"])] == ids[::2]
    assert [t.id for t in scale.get_tasks(project_name="rl", unique_id=["u1", "u3"])] == [
        ids[1], ids[3]]  # fmt: skip
    assert scale.get_tasks_count(project_name="rl", status=TaskStatus.Completed) == 0
    assert scale.get_tasks_count(project_name="rl", task_type=TaskType.Comparison) == 5
    assert scale.get_tasks_count(project_name="rl", task_type=TaskType.Categorization) == 0
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    later = (datetime.now(UTC) + timedelta(seconds=5)).strftime(fmt)
    assert scale.get_tasks_count(project_name="rl", created_after=start.strftime(fmt),
                                 created_before=later) == 5  # fmt: skip
    assert scale.get_tasks_count(project_name="rl", created_after=later) == 0
    limited = scale.tasks(project="rl", limited_response=True, limit=1).docs[0].as_dict()
    assert set(limited) == {"task_id", "status", "metadata", "project"}
    with pytest.raises(ScaleInvalidRequest, match="next_token"):
        scale.tasks(project="rl", next_token="garbage")
    with pytest.raises(ScaleResourceNotFound):
        scale.tasks(project="missing")


def study_completions(db: Database) -> int:
    with db.session() as session:
        payloads = session.scalars(select(Delivery.payload)).all()
    return sum(1 for payload in payloads if payload.get("event") == "study.complete")


def test_batches_hold_their_tasks_until_finalized(
    scale: ScaleClient, live_server: Any, api_key: str, settings: Settings, db: Database
) -> None:
    study_id = project(scale).as_dict()["study_id"]
    hook = requests.post(
        f"{live_server.url}/api/studies/{study_id}/webhooks",
        json={"url": "http://127.0.0.1:9/hook", "events": ["study.complete"]},
        headers={"Authorization": f"Bearer {api_key}"},
    )
    assert hook.status_code == 201, hook.text
    batch = scale.create_batch("rl", "b1", metadata={"round": 1})
    assert (batch.status, batch.project, batch.metadata) == ("staging", "rl", {"round": 1})
    held = [comparison(scale, n=n, batch="b1").id for n in range(2)]
    open_task = comparison(scale, n=5)
    publish(live_server.url, api_key, study_id)
    crowd = Crowd(live_server.url, api_key)
    assert crowd.answer("w1", study_id) == "Query number 5: say something"
    assert crowd.next("w1", study_id).get("done")  # the batch's tasks are not served yet
    run_worker(settings, burst=True)
    assert study_completions(db) == 0  # held tasks are not done tasks
    assert scale.batch_status("b1") == {"status": "staging", "pending": 2, "completed": 0,
                                        "canceled": 0, "error": 0}  # fmt: skip
    finalized = scale.finalize_batch("b1")
    assert finalized.status == "in_progress"
    assert scale.finalize_batch("b1").status == "in_progress"  # twice changes nothing
    queries = {crowd.answer("w1", study_id), crowd.answer("w1", study_id)}
    assert queries == {"Query number 0: say something", "Query number 1: say something"}
    run_worker(settings, burst=True)
    assert study_completions(db) == 1
    assert scale.get_batch("b1").name == "b1"
    assert [t.id for t in scale.get_tasks(batch_name="b1")] == held
    assert [b.name for b in scale.get_batches(project_name="rl")] == ["b1"]
    assert open_task.id not in held
    with pytest.raises(ScaleDuplicateResource):
        scale.create_batch("rl", "b1")
    calibration = scale.create_batch("rl", "b2", calibration_batch=True)
    assert calibration.as_dict()["calibration_batch"] is True
    assert scale.get_batch("b2").as_dict()["self_label_batch"] is False
    with pytest.raises(ScaleInvalidRequest, match="calibration_batch"):
        scale.create_batch("rl", "b4", calibration_batch="yes")
    with pytest.raises(ScaleInvalidRequest, match="batch callbacks are not supported"):
        scale.create_batch("rl", "b3", callback="https://example.org/done")
    project(scale, "other")
    with pytest.raises(ScaleInvalidRequest, match="belongs to project"):
        comparison(scale, "other", batch="b1")
    with pytest.raises(ScaleResourceNotFound):
        scale.batch_status("nope")


def test_evaluation_and_training_tasks_are_gold_and_training_items(
    scale: ScaleClient, db: Database
) -> None:
    project(scale)
    gold = scale.create_evaluation_task(
        TaskType.Comparison, project="rl", instruction="gold x", attachments=CANDIDATES,
        expected_response={"choice": 2})  # fmt: skip
    assert gold.expected_response == {"choice": 2}
    training = scale.create_training_task(
        TaskType.Comparison, project="rl", instruction="practice x", attachments=CANDIDATES,
        expected_response={"choice": "a calm reply"})  # fmt: skip
    gold_item, training_item = item_of(db, gold.id), item_of(db, training.id)
    assert (gold_item.kind, gold_item.expected) == (ItemKind.GOLD, {"best": 2})
    assert (training_item.kind, training_item.expected) == (ItemKind.TRAINING, {"best": 0})
    assert scale.get_task(gold.id).as_dict()["crowd"]["kind"] == "gold"
    assert scale.get_tasks_count(project_name="rl") == 0  # not customer tasks
    with pytest.raises(ScaleInvalidRequest, match="expected_response"):
        scale.create_evaluation_task(
            TaskType.Comparison,
            project="rl",
            instruction="g",
            attachments=CANDIDATES,
            expected_response={"choice": 7},
        )
    with pytest.raises(ScaleInvalidRequest, match="cannot be canceled"):
        scale.cancel_task(gold.id)


def test_cancel_stops_serving_and_audit_needs_a_completed_task(
    scale: ScaleClient, live_server: Any, api_key: str
) -> None:
    study_id = project(scale).as_dict()["study_id"]
    task = comparison(scale)
    publish(live_server.url, api_key, study_id)
    with pytest.raises(ScaleInvalidRequest, match="only completed"):
        scale.audit_task(task.id, True)
    canceled = scale.cancel_task(task.id)
    assert canceled.status == "canceled"
    with pytest.raises(ScaleInvalidRequest, match="already canceled"):
        scale.cancel_task(task.id)
    assert Crowd(live_server.url, api_key).next("w1", study_id).get("done")
    assert scale.get_tasks_count(project_name="rl", status=TaskStatus.Canceled) == 1


def test_tasks_complete_from_accepted_answers_only(
    scale: ScaleClient, live_server: Any, api_key: str, settings: Settings, app: Flask
) -> None:
    study_id = project(scale, annotations_per_item=2).as_dict()["study_id"]
    task = comparison(scale, choices=["A", "B", "C", "D"])
    publish(live_server.url, api_key, study_id)
    crowd = Crowd(live_server.url, api_key)
    crowd.answer("spammer", study_id, pick="dull")
    run_worker(settings, burst=True)
    assert scale.get_task(task.id).status == "pending"
    # A reviewer blocks the first worker: their answer no longer counts, someone else's does.
    worker_id = requests.get(f"{live_server.url}/api/studies/{study_id}/workers",
                             headers={"Authorization": f"Bearer {api_key}"}).json()[
        "workers"][0]["worker_id"]  # fmt: skip
    reply = requests.post(
        f"{live_server.url}/api/studies/{study_id}/workers/{worker_id}/actions",
        json={"action": "block", "reason": "always picks the last one"},
        headers={"Authorization": f"Bearer {api_key}"},
    )
    assert reply.status_code == 200, reply.text
    run_worker(settings, burst=True)
    crowd.answer("w1", study_id, pick="vivid")
    run_worker(settings, burst=True)
    assert scale.get_task(task.id).status == "pending"  # 1 of 2 accepted answers
    crowd.answer("w2", study_id, pick="vivid")
    run_worker(settings, burst=True)
    done = scale.get_task(task.id)
    assert done.status == "completed" and done.completed_at
    assert done.response == {"choice": 2, "chosen": "a vivid reply 0", "label": "C",
                             "votes": [0, 0, 2, 0], "responses": 2, "agreement": 1.0}  # fmt: skip
    assert done.callback_succeeded is None or done.callback_succeeded is False
    assert scale.get_tasks_count(project_name="rl", status=TaskStatus.Completed) == 1
    # The blocked answer was asked for again once (by the task's completion, not by QC too).
    assert crowd.next("w3", study_id).get("done")
    scale.audit_task(task.id, False, "the chosen reply is not vivid")
    audited = scale.get_task(task.id)
    assert audited.customer_review_status == "rejected"
    assert audited.audits[0]["comments"] == "the chosen reply is not vivid"
    assert scale.get_tasks_count(project_name="rl", review_status=TaskReviewStatus.Rejected) == 1
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    before = (datetime.now(UTC) - timedelta(minutes=5)).strftime(fmt)
    assert scale.get_tasks_count(project_name="rl", completed_after=before) == 1


def test_categorization_completes_with_the_category(
    scale: ScaleClient, live_server: Any, api_key: str, settings: Settings
) -> None:
    study_id = project(scale, "labels", TaskType.Categorization).as_dict()["study_id"]
    task = scale.create_task(TaskType.Categorization, project="labels", attachment="tomato",
                             categories=["red", "blue"])  # fmt: skip
    publish(live_server.url, api_key, study_id)
    Crowd(live_server.url, api_key).answer("w1", study_id, pick="red")
    run_worker(settings, burst=True)
    assert scale.get_task(task.id).response == {
        "category": "red",
        "votes": {"red": 1, "blue": 0},
        "responses": 1,
        "agreement": 1.0,
    }


def test_the_callback_auth_key_is_stable(http: Any) -> None:
    first = http.get("/v1/callback_auth_key").json()
    assert first["header"] == "scale-callback-auth" and len(first["callback_auth_key"]) >= 32
    assert http.get("/v1/callback_auth_key").json() == first


def test_openapi_describes_every_v1_route(app: Flask, client: Any) -> None:
    documented = set(client.get("/openapi.json").get_json()["paths"])
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/v1/"):
            assert rule.rule.replace("<", "{").replace(">", "}") in documented, rule.rule


def test_openapi_gives_v1_its_bodies_and_scales_errors(client: Any) -> None:
    spec = client.get("/openapi.json").get_json()
    schemas = spec["components"]["schemas"]
    operations = [op for path, item in spec["paths"].items() if path.startswith("/v1/")
                  for op in item.values()]  # fmt: skip
    assert len(operations) == 23
    for op in operations:
        assert set(op["responses"]) >= {"200", "400", "401", "503"}, op["operationId"]
        # scaleapi knows 400 for an invalid request; the keys are the experimenter's own.
        assert not set(op["responses"]) & {"422", "403"}, op["operationId"]
        assert op["responses"]["400"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ScaleError"}  # fmt: skip
    create = spec["paths"]["/v1/task/comparison"]["post"]
    body = create["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/NewComparisonTask"}
    task = schemas["NewComparisonTask"]
    assert task["additionalProperties"] is False
    assert {"instruction", "attachments"} <= set(task["required"])
    assert task["properties"]["attachments"]["maxItems"] == 8
    header = next(p for p in create["parameters"] if p["name"] == "Idempotency-Key")
    assert (header["in"], header["schema"]["maxLength"]) == ("header", 255)
    assert set(schemas["ScaleError"]["required"]) == {"status_code", "error", "type"}
    assert "ExpectedChoice" in schemas and "QualityTask" in schemas


def test_invalid_requests_are_400s_naming_every_field(http: Any) -> None:
    body = {
        "name": "rl",
        "type": "comparison",
        "params": {"crowd": {"attention_rate": 0.0, "pick": "attachment"}},
    }
    assert http.post("/v1/projects", body).status_code == 200
    task = {"project": "rl", "instruction": "x", "colour": "red", "tags": ["ok", 7],
            "attachments": ["a", "b", {"type": "text", "content": "c" * 10_001}]}  # fmt: skip
    reply = http.post("/v1/task/comparison", task)
    assert reply.status_code == 400
    error = ScaleError.model_validate(reply.json())
    assert (error.status_code, error.type) == (400, "ValidationError")
    problems = {problem.field: problem.message for problem in error.errors or []}
    assert set(problems) == {"colour", "tags[1]", "attachments[2]"}
    assert "the allowed fields are attachment_type, attachments" in problems["colour"]
    assert "content: String should have at most 10000 characters" in problems["attachments[2]"]
    gold = {"project": "rl", "instruction": "x", "attachments": CANDIDATES,
            "expected_response": {"choice": 1, "why": "it is kind"}}  # fmt: skip
    reply = http.post("/v1/evaluation_tasks/comparison", gold)
    assert reply.status_code == 400 and reply.json()["field"] == "expected_response.why"
    odd = {"name": "odd", "type": "comparison", "params": {"instruction": "x", "crowds": {}}}
    assert http.post("/v1/projects", odd).json()["field"] == "params.crowds"
    big = {"project": "rl", "name": "b", "metadata": {"blob": "x" * 50_001}}
    reply = http.post("/v1/batches", big)
    assert reply.status_code == 400 and reply.json()["field"] == "metadata"
    audit = http.post("/v1/task/0/audit", {"accepted": "yes"})  # no "yes" for true
    assert audit.status_code == 400 and audit.json()["field"] == "accepted"
    key = {"Idempotency-Key": "k" * 256}
    assert http.post("/v1/batches", {"project": "rl", "name": "b"}, headers=key).json()[
        "field"] == "Idempotency-Key"  # fmt: skip
    for query, field in [
        ("limit=101", "limit"),
        ("status=done", "status"),
        ("start_time=yesterday", "start_time"),
        ("colour=red", "colour"),
        # In UTC these leave the calendar: a 400, not an overflow.
        ("start_time=0001-01-01T00:00:00%2B05:00", "start_time"),
        ("end_time=9999-12-31T23:59:59-05:00", "end_time"),
        ("customer_review_status=accepted,maybe", "customer_review_status[1]"),
    ]:
        reply = http.get(f"/v1/tasks?project=rl&{query}")
        assert (reply.status_code, reply.json()["field"]) == (400, field), query
    schedule = http.get("/v1/projects/rl/label_schedule?step=1&initial=0&total=9&policy_steps=0")
    assert (schedule.status_code, schedule.json()["field"]) == (400, "policy_steps")


def test_an_unknown_task_type_says_which_types_are_spoken(scale: ScaleClient, http: Any) -> None:
    project(scale)
    with pytest.raises(ScaleInvalidRequest, match="'imageannotation' is not available here"):
        scale.create_task(TaskType.ImageAnnotation, project="rl", attachment="x")
    with pytest.raises(ScaleInvalidRequest, match="comparison, categorization, textcollection"):
        scale.create_evaluation_task(TaskType.Transcription, project="rl")
    missing = http.get("/v1/no_such_route")
    assert missing.status_code == 404 and missing.json()["status_code"] == 404


def test_the_online_label_schedule_counts_the_projects_tasks(scale: ScaleClient, http: Any) -> None:
    project(scale)
    for n in range(3):
        comparison(scale, n=n)
    query = "step=50&initial=10&total=100&policy_steps=100&min_outstanding=5"
    reply = http.get(f"/v1/projects/rl/label_schedule?{query}")
    assert reply.status_code == 200
    body = reply.json()
    # l(50) = 10 + 90 * (1 - 0.5^2) = 77.5, rounded up; 3 tasks are pending, none completed.
    assert body["labels_wanted"] == 78
    assert (body["labelled"], body["outstanding"]) == (0, 3)
    assert body["requests_to_send"] == 75
    missing = http.get("/v1/projects/rl/label_schedule?step=5&initial=1&total=9")
    assert missing.status_code == 400 and "policy_steps" in missing.json()["error"]
    bad = http.get("/v1/projects/rl/label_schedule?step=x&initial=1&total=9&policy_steps=3")
    assert bad.status_code == 400
    assert http.get(f"/v1/projects/nope/label_schedule?{query}").status_code == 404
