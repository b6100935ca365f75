"""Gold and attention items look exactly like real ones to the worker, for every HIT type.

Before the answer is stored, the bodies the worker's page gets (next, the assignment view,
each step) have the same keys for real, gold and attention items, and the same values as the
very same content served as a real item in a twin study: nothing in them depends on the item's
kind or expected answer. After the answer the feedback has one shape for every kind (the same
thanks for Likert and comparison; boundary reveals the truth for every kind, and only once the
response is stored). The worker page itself carries no item data at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.storage import Assignment, Database, Item, Response
from tests.conftest import join

SAMPLES = Path(__file__).resolve().parents[2] / "tasks"
# Keys that would tell a worker what kind of item this is or what the right answer is.
FORBIDDEN = {
    "kind", "gold", "attention", "training", "expected", "expected_rating", "expected_ratings",
    "best", "boundary", "correct", "score", "points", "meta", "utility", "policy", "policies",
}  # fmt: skip
ANSWER_FIELDS = ("kind", "best", "expected_rating", "expected_ratings")


def sample(hit_type: str, name: str) -> list[dict[str, Any]]:
    path = SAMPLES / hit_type / "samples" / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def boundary_items() -> list[dict[str, Any]]:
    passages = sample("boundary", "passages.jsonl")
    check = sample("boundary", "attention.jsonl")[0]
    return [
        passages[0],
        {**passages[1], "id": "gold-item", "kind": "gold", "boundary": 4},
        {**check, "id": "check-item", "kind": "attention"},
    ]


def likert_items() -> list[dict[str, Any]]:
    stories = sample("likert", "stories.jsonl")
    check = sample("likert", "attention.jsonl")[0]
    expected = {"grammaticality": 5, "cohesiveness": 1, "likability": 4, "relevance": 2}
    return [
        stories[0],
        {**stories[1], "id": "gold-item", "kind": "gold", "expected_ratings": expected},
        {**check, "id": "check-item"},
    ]


def comparison_items() -> list[dict[str, Any]]:
    real = sample("comparison", "sentiment.jsonl")
    check = sample("comparison", "attention.jsonl")[0]
    return [
        real[0],
        {**real[1], "id": "gold-item", "kind": "gold", "best": 2},
        {**check, "id": "check-item"},
    ]


def as_real(record: dict[str, Any]) -> dict[str, Any]:
    """The same content as a real item (boundary real items carry a boundary too)."""
    plain = {k: v for k, v in record.items() if k not in ANSWER_FIELDS}
    if "sentences" in plain:
        plain.setdefault("boundary", len(plain["sentences"]))
    return plain


# How each HIT type's worker answers a step: the same way on every item.
def boundary_step(task: dict[str, Any]) -> dict[str, Any]:
    return {"step": task["step"], "choice": "machine" if task["step"] == 1 else "human"}


def likert_step(task: dict[str, Any]) -> dict[str, Any]:
    return {"step": task["step"], "rating": 3}


def comparison_step(task: dict[str, Any]) -> dict[str, Any]:
    return {"step": task["step"], "choice": 0}


@dataclass(frozen=True)
class Case:
    hit_type: str
    items: Callable[[], list[dict[str, Any]]]
    step: Callable[[dict[str, Any]], dict[str, Any]]
    config: dict[str, Any]


CASES = [
    Case("boundary", boundary_items, boundary_step, {}),
    Case("likert", likert_items, likert_step, {}),
    Case(
        "comparison",
        comparison_items,
        comparison_step,
        {"template": "sentiment", "overlap_share": 0},
    ),
]


@dataclass
class Played:
    """Everything the worker's page got for one item, split at the stored answer."""

    external_id: str = ""
    kind: str = ""
    before: list[dict[str, Any]] = field(default_factory=list)
    after: list[dict[str, Any]] = field(default_factory=list)


def has_response(db: Database, assignment_id: int) -> bool:
    with db.session() as session:
        found = session.scalar(select(Response.id).where(Response.assignment_id == assignment_id))
        return found is not None


def play_everything(
    client: FlaskClient, who: dict[str, str], study_id: int, case: Case, db: Database
) -> dict[str, Played]:
    """Play every item the study gives the worker; the bodies by item kind (or id in twins)."""
    played: dict[int, Played] = {}

    def keep(reply: Any) -> dict[str, Any]:
        assert reply.status_code == 200, reply.get_json()
        body: dict[str, Any] = reply.get_json()
        entry = played.setdefault(body["assignment_id"], Played())
        # Classified by the database after the request: was the answer stored by then?
        (entry.after if has_response(db, body["assignment_id"]) else entry.before).append(body)
        return body

    for _ in range(10):
        reply = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
        if reply.get_json().get("done"):
            break
        view = keep(reply)
        path = f"/api/work/assignments/{view['assignment_id']}"
        keep(client.get(path, headers=who))
        while "task" in view and not view.get("answered"):
            view = keep(client.post(f"{path}/step", json=case.step(view["task"]), headers=who))
        if view.get("needs_followup"):
            keep(client.post(f"{path}/explanation", json={"reasons": ["grammar"]}, headers=who))
        keep(client.get(path, headers=who))  # the page reloaded after the answer
    else:
        pytest.fail("the study never ran out of items")
    with db.session() as session:
        for assignment_id, entry in played.items():
            item = session.scalars(
                select(Item)
                .join(Assignment, Assignment.item_id == Item.id)
                .where(Assignment.id == assignment_id)
            ).one()
            entry.external_id, entry.kind = item.external_id, str(item.kind)
    return {entry.external_id: entry for entry in played.values()}


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key of a JSON value with its path, e.g. "task.attribute.scale"."""
    if isinstance(value, dict):
        paths = set()
        for key, child in value.items():
            path = f"{prefix}{key}"
            paths |= {path} | key_paths(child, path + ".")
        return paths
    if isinstance(value, list):
        return {p for child in value for p in key_paths(child, prefix)}
    return set()


def strings(value: Any) -> list[str]:
    """The longer strings anywhere in a record (texts, sentences, candidates)."""
    if isinstance(value, str):
        return [value] if len(value) > 20 else []
    if isinstance(value, dict):
        return [s for child in value.values() for s in strings(child)]
    if isinstance(value, list):
        return [s for child in value for s in strings(child)]
    return []


def keys_anywhere(value: Any) -> set[str]:
    return {path.rsplit(".", 1)[-1] for path in key_paths(value)}


def normalised(body: dict[str, Any]) -> dict[str, Any]:
    """A body without its ids, and candidates in a fixed order (the display order is random).

    Without the item's position too: the worker counts it anyway, and the twin serves its items
    in another order. The number of items (items_total) stays: it must not tell the kind.
    """
    out = {k: v for k, v in body.items() if k not in ("assignment_id", "study_id", "item_number")}
    task = out.get("task")
    if isinstance(task, dict) and isinstance(task.get("candidates"), list):
        out["task"] = {**task, "candidates": sorted(task["candidates"])}
    return out


def make(make_study: Callable[..., int], case: Case, records: list[dict[str, Any]]) -> int:
    config = {
        "annotations_per_item": 1,
        # One check within a worker's first two items; gold at every chance while real work
        # is left: every worker meets a real, a gold and an attention item.
        "attention_rate": 0.5,
        "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}},
        **case.config,
    }
    return make_study(records, config, hit_type=case.hit_type)


@pytest.mark.parametrize("case", CASES, ids=[case.hit_type for case in CASES])
def test_gold_and_attention_items_look_like_real_ones(
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    case: Case,
) -> None:
    records = case.items()
    study_id = make(make_study, case, records)
    twin_id = make(make_study, case, [as_real(record) for record in records])
    played = play_everything(client, join(client, auth, external_id="w"), study_id, case, db)
    twin = play_everything(client, join(client, auth, external_id="twin"), twin_id, case, db)
    by_kind = {entry.kind: entry for entry in played.values()}
    assert sorted(by_kind) == ["attention", "gold", "real"]
    assert {entry.kind for entry in twin.values()} == {"real"}

    # (a) The same keys, at every depth, before the answer; nothing naming kind or answer.
    shapes = {kind: set().union(*map(key_paths, e.before)) for kind, e in by_kind.items()}
    assert shapes["gold"] == shapes["real"] == shapes["attention"]
    for entry in by_kind.values():
        assert len(entry.before) >= 2
        for body in entry.before:
            assert not FORBIDDEN & keys_anywhere(body), (entry.kind, body)
            assert "feedback" not in body and not body.get("answered")
        # Step by step, the same keys as the real item's bodies at the same point.
        assert [key_paths(b) for b in entry.before] == [
            key_paths(b) for b in by_kind["real"].before
        ]

    # (b) The very same values as the same content served as a real item: nothing in the
    # bodies depends on the kind or the expected answer.
    for external_id, entry in played.items():
        assert [normalised(b) for b in entry.before] == [
            normalised(b) for b in twin[external_id].before
        ], external_id
    for entry in by_kind.values():
        for body in entry.before:
            text = json.dumps(body)
            for name in ("expected", '"best"', '"boundary"', '"kind"', "gold-item", "check-item"):
                assert name not in text, (entry.kind, name)
            if case.hit_type == "likert":  # a whole set of expected ratings never appears
                assert json.dumps(records[1]["expected_ratings"])[1:-1] not in text

    # (c) After the answer: one shape of feedback for every kind, and only once stored.
    feedback = {
        kind: [b["feedback"] for b in e.after if "feedback" in b] for kind, e in by_kind.items()
    }
    assert all(feedback.values())
    if case.hit_type == "boundary":
        # Every kind reveals the boundary, after the explanation is in, never before the
        # answer is stored.
        assert {frozenset(f) for fs in feedback.values() for f in fs} == {
            frozenset({"guess", "boundary", "points", "distance", "sentences"})
        }
        for entry in by_kind.values():
            assert entry.after[0].get("needs_followup") is True and "feedback" not in entry.after[0]
        assert feedback["gold"][0]["boundary"] == 4
    else:
        assert feedback["real"] == feedback["gold"] == feedback["attention"]
        assert len({json.dumps(f, sort_keys=True) for fs in feedback.values() for f in fs}) == 1
        assert "Thank you" in feedback["gold"][0]["message"]
    after_shapes = {kind: set().union(*map(key_paths, e.after)) for kind, e in by_kind.items()}
    assert after_shapes["gold"] == after_shapes["real"] == after_shapes["attention"]
    # Stored answers were scored against what the worker never saw.
    with db.session() as session:
        flags = {
            item.external_id: response.qc_flags
            for response, item in session.execute(
                select(Response, Item)
                .join(Item, Item.id == Response.item_id)
                .where(Response.study_id == study_id)
            )
        }
    assert "gold_accuracy" in flags["gold-item"] and "attention_passed" in flags["check-item"]

    # (d) The worker page holds no item data, let alone answers.
    page = client.get(f"/play/{study_id}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    for record in records:
        assert record["id"] not in html
        for text in strings(record):
            assert text not in html
    for word in ("expected_rating", "gold-item", "check-item", '"best"', "data-kind"):
        assert word not in html
