"""The worker's flow through the HTTP API: reveal, guess, explanation, reveal of the truth."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from crowd.storage import Assignment, Database, OutboxEvent, Response
from tests.conftest import join, passage


def step(client: FlaskClient, who: dict[str, str], view: dict[str, Any], choice: str) -> Any:
    return client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": view["task"]["step"], "choice": choice},
        headers=who,
    )


def start(client: FlaskClient, who: dict[str, str], study_id: int) -> dict[str, Any]:
    response = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def play(client: FlaskClient, who: dict[str, str], study_id: int, guess: int) -> dict[str, Any]:
    """Play one item through to the reveal, guessing `guess` (n = all human)."""
    view = start(client, who, study_id)
    n = view["task"]["n_sentences"]
    while view["task"]["step"] < min(guess, n - 1):
        view = step(client, who, view, "human").get_json()
    view = step(client, who, view, "machine" if guess < n else "human").get_json()
    if view.get("needs_followup"):
        view = client.post(
            f"/api/work/assignments/{view['assignment_id']}/explanation",
            json={"explanation": "it repeats itself", "reasons": ["repetition"]},
            headers=who,
        ).get_json()
    return view


@pytest.mark.parametrize(
    ("guess", "boundary", "points"),
    [(1, 3, 0), (2, 3, 0), (3, 3, 5), (4, 3, 4), (5, 3, 3), (5, 5, 5), (4, 5, 0), (1, 1, 5)],
)
def test_points_are_computed_on_the_server(
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Any,
    guess: int,
    boundary: int,
    points: int,
) -> None:
    study_id = make_study([passage("a", boundary, n=5)], {"annotations_per_item": 1})
    who = join(client, auth)
    view = play(client, who, study_id, guess)
    assert view["feedback"]["guess"] == guess
    assert view["feedback"]["boundary"] == boundary
    assert view["feedback"]["points"] == points


def test_sentences_are_revealed_one_at_a_time_with_server_timestamps(
    client: FlaskClient, auth: dict[str, str], make_study: Any, db: Database
) -> None:
    study_id = make_study([passage("a", 3, n=5)])
    who = join(client, auth)
    view = start(client, who, study_id)
    assert view["task"]["sentences"] == ["a sentence number 0 of the passage."]
    assert "boundary" not in str(view) and "expected" not in view
    for expected_step in (1, 2, 3):
        view = step(client, who, view, "human").get_json()
        assert view["task"]["step"] == expected_step
        assert len(view["task"]["sentences"]) == expected_step + 1
        assert view["task"]["sentences"][-1].endswith(f"number {expected_step} of the passage.")
        assert "feedback" not in view
    view = step(client, who, view, "machine").get_json()
    assert view["needs_followup"] is True and "feedback" not in view
    with db.session() as session:
        response = session.scalars(select(Response)).one()
        reveals = [e for e in response.events if e["type"] == "reveal"]
        assert [e["index"] for e in reveals] == [0, 1, 2, 3]
        times = [datetime.fromisoformat(e["at"]) for e in response.events]
        assert times == sorted(times) and all(t.tzinfo is not None for t in times)
        assert response.answer == {"guess": 3, "all_human": False}
        assert response.score == 5


def test_the_reveal_waits_for_the_explanation(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage("a", 2, n=4)])
    who = join(client, auth)
    view = step(client, who, start(client, who, study_id), "human").get_json()
    view = step(client, who, view, "machine").get_json()
    path = f"/api/work/assignments/{view['assignment_id']}"
    assert "feedback" not in client.get(path, headers=who).get_json()
    bad = client.post(f"{path}/explanation", json={"explanation": " "}, headers=who)
    assert bad.status_code == 409
    unknown_tag = client.post(f"{path}/explanation", json={"reasons": ["vibes"]}, headers=who)
    assert unknown_tag.status_code == 422 and unknown_tag.get_json()["field"] == "reasons[0]"
    done = client.post(f"{path}/explanation", json={"reasons": ["grammar"]}, headers=who)
    assert done.get_json()["feedback"]["boundary"] == 2


def test_a_repeated_submission_returns_the_stored_result(
    client: FlaskClient, auth: dict[str, str], make_study: Any, db: Database
) -> None:
    study_id = make_study([passage("a", 4, n=4)])
    who = join(client, auth)
    view = start(client, who, study_id)
    for _ in range(3):
        view = step(client, who, view, "human").get_json()
    final = {"step": 3, "choice": "human"}
    path = f"/api/work/assignments/{view['assignment_id']}/step"
    first = client.post(path, json=final, headers=who).get_json()
    again = client.post(path, json=final, headers=who).get_json()
    other_choice = client.post(path, json={"step": 3, "choice": "machine"}, headers=who).get_json()
    assert first["feedback"] == again["feedback"] == other_choice["feedback"]
    assert first["feedback"]["points"] == 5
    with db.session() as session:
        assert session.scalar(select(func.count(Response.id))) == 1
        assert session.scalar(select(func.count(OutboxEvent.id))) == 1


def test_a_second_answer_to_an_item_is_refused_and_changes_nothing(
    client: FlaskClient, auth: dict[str, str], make_study: Any, db: Database
) -> None:
    """One answer per worker and item: should the worker's answer to the item be stored
    already (written by hand here, past serving, which never hands out a seen item),
    storing another is a 409 and the whole step rolls back."""
    study_id = make_study([passage("a", 2, n=3)])
    who = join(client, auth)
    view = step(client, who, start(client, who, study_id), "human").get_json()
    with db.session() as session:
        open_one = session.get(Assignment, view["assignment_id"])
        assert open_one is not None
        progress = dict(open_one.progress)
        session.add(Response(study_id=study_id, item_id=open_one.item_id,
                             worker_id=open_one.worker_id, answer={"guess": 1}, events=[],
                             qc_flags={}))  # fmt: skip
    refused = step(client, who, view, "machine")
    assert refused.status_code == 409, refused.get_json()
    assert "already answered this item" in str(refused.get_json()), refused.get_json()
    with db.session() as session:
        assert session.scalar(select(func.count(Response.id))) == 1
        assert session.scalar(select(func.count(OutboxEvent.id))) == 0
        kept = session.get(Assignment, view["assignment_id"])
        assert kept is not None and kept.state == "assigned" and kept.progress == progress


def test_a_replayed_step_reveals_nothing_new(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage("a", 4, n=5)])
    who = join(client, auth)
    view = start(client, who, study_id)
    once = step(client, who, view, "human").get_json()
    twice = step(client, who, view, "human").get_json()  # same step index again
    assert once["task"] == twice["task"]
    ahead = client.post(
        f"/api/work/assignments/{view['assignment_id']}/step",
        json={"step": 4, "choice": "human"},
        headers=who,
    )
    assert ahead.status_code == 409


def test_sentence_zero_cannot_be_called_machine(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage("a", 2)])
    who = join(client, auth)
    assert step(client, who, start(client, who, study_id), "machine").status_code == 409


def test_workers_cannot_touch_each_others_assignments(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage("a", 2)])
    alice = join(client, auth, external_id="alice")
    mallory = join(client, auth, external_id="mallory")
    view = start(client, alice, study_id)
    path = f"/api/work/assignments/{view['assignment_id']}"
    assert client.get(path, headers=mallory).status_code == 404
    assert (
        client.post(
            f"{path}/step", json={"step": 0, "choice": "human"}, headers=mallory
        ).status_code
        == 404
    )
    forged = {"X-Crowd-Worker": alice["X-Crowd-Worker"][:-2] + "xx"}
    assert client.get(path, headers=forged).status_code == 401
    client.delete_cookie("crowd_worker")  # join() also set mallory's cookie
    assert client.get(path).status_code == 401


def test_items_go_to_their_target_and_never_twice_to_a_worker(
    client: FlaskClient, auth: dict[str, str], make_study: Any, db: Database
) -> None:
    study_id = make_study([passage(f"p{i}", 2, n=3) for i in range(3)], {"annotations_per_item": 2})
    done: dict[str, list[str]] = {}
    for name in ("w1", "w2", "w3", "w4"):
        who = join(client, auth, external_id=name)
        done[name] = []
        while True:
            view = client.post(
                f"/api/work/studies/{study_id}/next", json={}, headers=who
            ).get_json()
            if view.get("done"):
                assert "every item" in view["message"]
                break
            done[name].append(view["assignment_id"])
            play_rest(client, who, view)
    with db.session() as session:
        per_item = dict(
            session.execute(
                select(Assignment.item_id, func.count()).group_by(Assignment.item_id)
            ).all()
        )
        pairs = session.execute(select(Assignment.worker_id, Assignment.item_id)).all()
    assert sorted(per_item.values()) == [2, 2, 2]
    assert len(pairs) == len(set(pairs)) == 6
    # Items with some annotations are preferred: the first two workers share their items.
    assert len(done["w1"]) == 3 and len(done["w2"]) == 3 and done["w3"] == done["w4"] == []


def play_rest(client: FlaskClient, who: dict[str, str], view: dict[str, Any]) -> None:
    while "task" in view and not view.get("answered"):
        view = step(client, who, view, "human").get_json()


def test_the_open_assignment_is_resumed_not_duplicated(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage(f"p{i}", 2) for i in range(3)])
    who = join(client, auth)
    first = start(client, who, study_id)
    second = start(client, who, study_id)
    assert first["assignment_id"] == second["assignment_id"]


def test_concurrent_requests_never_overfill_an_item(
    live_server: Any, api_key: str, make_study: Any, db: Database
) -> None:
    import requests

    study_id = make_study([passage(f"p{i}", 2, n=3) for i in range(4)], {"annotations_per_item": 3})
    auth_header = {"Authorization": f"Bearer {api_key}"}
    tokens = []
    for n in range(12):
        reply = requests.post(
            f"{live_server.url}/api/work/join",
            headers=auth_header,
            json={"provider": "sim", "external_id": f"c{n}"},
            timeout=10,
        )
        tokens.append(reply.json()["worker_token"])
    barrier = threading.Barrier(len(tokens))
    errors: list[str] = []

    def grab(token: str) -> None:
        barrier.wait()
        for _ in range(2):  # each asks twice at once: the second must resume the first
            reply = requests.post(
                f"{live_server.url}/api/work/studies/{study_id}/next",
                json={},
                headers={"X-Crowd-Worker": token},
                timeout=30,
            )
            if reply.status_code != 200:
                errors.append(reply.text)

    threads = [threading.Thread(target=grab, args=(t,)) for t in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with db.session() as session:
        per_item = session.execute(
            select(Assignment.item_id, func.count()).group_by(Assignment.item_id)
        ).all()
        per_worker = session.execute(
            select(Assignment.worker_id, func.count()).group_by(Assignment.worker_id)
        ).all()
    assert all(count <= 3 for _item, count in per_item) and sum(c for _i, c in per_item) == 12
    assert all(count == 1 for _worker, count in per_worker)


def answer_machine_at_one(client: FlaskClient, who: dict[str, str], study_id: int) -> bool:
    """Take the next item and answer "machine" at sentence 1 (wrong for an attention check),
    then explain; whether the item was an attention check (its text starts "att")."""
    view = start(client, who, study_id)
    check = view["task"]["sentences"][0].startswith("att")
    view = step(client, who, step(client, who, view, "human").get_json(), "machine").get_json()
    client.post(
        f"/api/work/assignments/{view['assignment_id']}/explanation",
        json={"reasons": ["other"]},
        headers=who,
    )
    return bool(check)


def test_attention_checks_are_paced_and_scored(
    client: FlaskClient, auth: dict[str, str], make_study: Any, db: Database
) -> None:
    items = [passage(f"p{i}", 2, n=3) for i in range(20)]
    items += [passage(f"att{i}", 3, n=3, kind="attention") for i in range(3)]
    study_id = make_study(items, {"annotations_per_item": 1, "attention_rate": 0.1})
    who = join(client, auth)
    kinds = []
    for _ in range(20):
        kinds.append(answer_machine_at_one(client, who, study_id))
    assert sum(kinds) == 2  # one per ten items
    with db.session() as session:
        flags = [r.qc_flags for r in session.scalars(select(Response))]
    assert [f["attention_passed"] for f in flags if "attention_passed" in f] == [False, False]


@pytest.mark.parametrize(("attention_rate", "checks_first"), [(0.05, 3), (0.0, 0)])
def test_a_worker_qc_doubts_meets_extra_attention_checks(
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Any,
    db: Database,
    attention_rate: float,
    checks_first: int,
) -> None:
    """At the check rate of their last QC refresh (qc.attention.doubt_check_rate), in studies
    that serve checks at all."""
    from crowd.quality.standing import standing
    from crowd.storage import Worker

    items = [passage(f"p{i}", 2, n=3) for i in range(6)]
    items += [passage(f"att{i}", 3, n=3, kind="attention") for i in range(3)]
    study_id = make_study(items, {"annotations_per_item": 1, "attention_rate": attention_rate})
    who = join(client, auth)
    with db.session() as session:
        worker_id = session.scalar(select(Worker.id).where(Worker.external_id == "w1"))
        row = standing(session, study_id, worker_id)
        row.evidence = {"stopped_reading_prob": 0.99, "check_rate": 1.0}
    kinds = []
    for _ in range(6):
        kinds.append(answer_machine_at_one(client, who, study_id))
    # Every check first while the doubt lasts (here it is never refreshed away), then work.
    assert kinds == [True] * checks_first + [False] * (6 - checks_first)


def test_workers_only_see_studies_published_to_their_provider(
    client: FlaskClient, make_study: Any
) -> None:
    study_id = make_study([passage("a", 2)], providers=("sim",))
    player = join(client, name="visitor")
    reply = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=player)
    assert reply.status_code == 409 and "not published to local" in reply.get_json()["error"]


def test_sim_workers_need_an_experimenter_key(client: FlaskClient) -> None:
    reply = client.post("/api/work/join", json={"provider": "sim", "external_id": "x"})
    assert reply.status_code == 401


def test_a_returned_item_goes_to_someone_else(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage("a", 2)], {"annotations_per_item": 1})
    first = join(client, auth, external_id="first")
    second = join(client, auth, external_id="second")
    view = start(client, first, study_id)
    assert start(client, second, study_id).get("done") is True
    returned = client.post(f"/api/work/assignments/{view['assignment_id']}/return", headers=first)
    assert returned.get_json()["state"] == "returned"
    assert start(client, second, study_id)["task"]["step"] == 0
    assert start(client, first, study_id).get("done") is True  # never the same item twice


def test_stale_assignments_are_abandoned_and_their_items_freed(
    client: FlaskClient, auth: dict[str, str], make_study: Any, db: Database
) -> None:
    from datetime import timedelta

    from crowd.work.assignments import abandon_stale

    study_id = make_study([passage("a", 2)], {"annotations_per_item": 1})
    idle = join(client, auth, external_id="idle")
    other = join(client, auth, external_id="other")
    view = start(client, idle, study_id)
    with db.session() as session:
        assert abandon_stale(session, timedelta(minutes=30)) == 0
        assert abandon_stale(session, timedelta(seconds=0)) == 1
    path = f"/api/work/assignments/{view['assignment_id']}"
    assert client.get(path, headers=idle).get_json()["state"] == "abandoned"
    late = client.post(f"{path}/step", json={"step": 0, "choice": "human"}, headers=idle)
    assert late.status_code == 409
    assert start(client, other, study_id)["task"]["step"] == 0


def refusal(reply: Any) -> tuple[str, str]:
    """The field a 422 names and its first problem's message."""
    assert reply.status_code == 422, (reply.status_code, reply.get_json())
    body = reply.get_json()
    return body["field"], body["errors"][0]["message"] if body.get("errors") else body["error"]


def test_join_names_what_is_wrong(client: FlaskClient) -> None:
    field, message = refusal(client.post("/api/work/join", json={"provider": "upwork"}))
    assert field == "provider" and "local" in message and "prolific" in message
    field, message = refusal(client.post("/api/work/join", json={"nmae": "Ada"}))
    assert field == "nmae" and "external_id, name, provider" in message
    assert refusal(client.post("/api/work/join", json={"name": "x" * 41}))[0] == "name"
    assert refusal(client.post("/api/work/join", json={"name": "<b>Ada</b>"}))[0] == "name"
    assert refusal(client.post("/api/work/join", json={"name": "   "}))[0] == "name"
    assert refusal(client.post("/api/work/join", json={"name": 7}))[0] == "name"
    not_object = client.post("/api/work/join", json=None, data="null",
                             content_type="application/json")  # fmt: skip
    assert refusal(not_object)[0] == "body"
    # A form post is not JSON: refused before anything is read, as cross-site posts are.
    assert client.post("/api/work/join", data={"name": "Ada"}).status_code == 415
    ada = client.post("/api/work/join", json={"name": "  Ada L.  "})
    assert ada.status_code == 201 and ada.get_json()["name"] == "Ada L."
    assert "crowd_worker=" in ada.headers["Set-Cookie"]
    me = client.get("/api/work/me", headers={"X-Crowd-Worker": ada.get_json()["worker_token"]})
    assert me.get_json() == {"worker_id": ada.get_json()["worker_id"], "name": "Ada L.",
                             "provider": "local"}  # fmt: skip


def test_steps_and_explanations_are_objects_with_bounded_fields(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage("a", 2, n=3)], {"annotations_per_item": 1})
    who = join(client, auth)
    view = start(client, who, study_id)
    path = f"/api/work/assignments/{view['assignment_id']}"

    def sent(action: str, body: Any) -> Any:
        return client.post(f"{path}/{action}", json=body, headers=who)

    assert refusal(sent("step", [0, "human"]))[0] == "body"
    assert refusal(sent("step", {"choice": "human"})) == ("step", "is required")
    assert refusal(sent("step", {"step": "0", "choice": "human"}))[0] == "step"
    assert refusal(sent("step", {"step": True, "choice": "human"}))[0] == "step"
    assert refusal(sent("step", {"step": 1001, "choice": "human"}))[0] == "step"
    assert refusal(sent("step", {"step": 0, "sim_seconds": -1}))[0] == "sim_seconds"
    assert refusal(sent("step", {"step": 0, "choice": {"a": 1}}))[0] == "choice"
    assert refusal(sent("step", {"step": 0, "choice": "maybe"}))[0] == "choice"
    assert refusal(sent("step", {"step": 0, "choice": 8}))[0] == "choice"
    assert refusal(sent("step", {"step": 0, "choice": "human", "f0": 1}))[0] == "f0"
    # Another HIT type's field is declared, and refused by this one, naming it.
    field, message = refusal(sent("step", {"step": 0, "choice": "human", "rating": 3}))
    assert field == "rating" and "boundary studies" in message and "choice, step" in message
    # The HIT type still judges its own fields (409, as before).
    assert sent("step", {"step": 0, "choice": 1}).status_code == 409
    view = sent("step", {"step": 0, "choice": "human"}).get_json()
    assert set(view) == {"assignment_id", "study_id", "state", "task"}  # no null placeholders
    view = sent("step", {"step": 1, "choice": "machine"}).get_json()
    assert view["needs_followup"] is True and "feedback" not in view

    field, message = refusal(sent("explanation", {"reasons": ["grammar"], "typing": {"keyz": 1}}))
    assert field == "typing.keyz" and "keys, pasted_chars, pastes, typing_ms" in message
    typed = {"reasons": ["grammar"], "typing": {"keys": 100_001}}
    assert refusal(sent("explanation", typed))[0] == "typing.keys"
    listed = {"reasons": ["grammar", "g" * 10_001]}
    assert refusal(sent("explanation", listed))[0] == "reasons[1]"
    assert refusal(sent("explanation", {"reasons": ["vibes"]}))[0] == "reasons[0]"
    assert refusal(sent("explanation", {"explanation": "x" * 2001}))[0] == "explanation"
    done = sent("explanation", {"reasons": ["grammar"], "typing": {"keys": 3, "typing_ms": 900}})
    assert done.status_code == 200 and done.get_json()["feedback"]["boundary"] == 2


def test_next_takes_a_category_name(
    client: FlaskClient, auth: dict[str, str], make_study: Any
) -> None:
    study_id = make_study([passage("a", 2, category="news")], {"annotations_per_item": 1})
    who = join(client, auth)
    next_url = f"/api/work/studies/{study_id}/next"
    assert refusal(client.post(next_url, json={"category": 3}, headers=who))[0] == "category"
    assert refusal(client.post(next_url, json={"topic": "news"}, headers=who))[0] == "topic"
    empty = client.post(next_url, json={"category": "sports"}, headers=who).get_json()
    assert empty == {"done": True, "message": empty["message"]}  # no completion key off-platform
    assert "task" in client.post(next_url, headers=who).get_json()  # no body: any category


def test_openapi_describes_the_worker_api(client: FlaskClient) -> None:
    spec = client.get("/openapi.json").get_json()
    join_op = spec["paths"]["/api/work/join"]["post"]
    assert set(join_op["responses"]) >= {"201", "401", "415", "422"}
    schemas = spec["components"]["schemas"]
    assert schemas["JoinBody"]["properties"]["provider"]["enum"] == [
        "local", "mturk", "prolific", "sim",
    ]  # fmt: skip
    step_op = spec["paths"]["/api/work/assignments/{assignment_id}/step"]["post"]
    assert "409" in step_op["responses"] and step_op["security"] == [{"workerToken": []}]
    assert schemas["StepBody"]["required"] == ["step"]
    assert schemas["StepBody"]["additionalProperties"] is False
    assert set(schemas["StepBody"]["properties"]) == {
        "step", "sim_seconds", "choice", "rating", "fields",
    }  # fmt: skip
    view = schemas["AssignmentView"]
    assert view["required"] == ["assignment_id", "study_id", "state"]
    assert view["additionalProperties"] is False
