"""The SQL a worker's steps cost: each step request loads what it needs in one statement and
stores an answer with the minimal honest work (issue 20), on SQLite and, in CI's second
run, on PostgreSQL. The counts are exact, so a change that adds a lookup shows here."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import event, select

from crowd.storage import Assignment, Database, Item, OutboxEvent, Response, Worker
from crowd.work import assignments as work
from tests.conftest import join, passage

# Transaction control is not work: BEGIN (IMMEDIATE on SQLite), SAVEPOINT and RELEASE.
_CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT", "ROLLBACK")


def verb_and_table(statement: str) -> str:
    """The verb and table of a statement: SELECT assignments, INSERT responses."""
    words = statement.split()
    if words[0] == "SELECT":
        return f"SELECT {words[words.index('FROM') + 1]}"
    return f"{words[0]} {words[1] if words[0] == 'UPDATE' else words[2]}"


def first_table(statement: str) -> str:
    """As verb_and_table, but a SELECT is named by the table of its first column: the one
    that decides what to serve reads other tables in subqueries among its columns."""
    words = statement.split()
    if words[0] == "SELECT":
        return f"SELECT {words[1].split('.')[0]}"
    return verb_and_table(statement)


@pytest.fixture
def statements(app: Flask) -> Iterator[list[str]]:
    engine = app.extensions["crowd"].db.engine
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if not statement.lstrip().upper().startswith(_CONTROL):
            seen.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", record)
    yield seen
    event.remove(engine, "before_cursor_execute", record)


def test_a_reveal_step_is_two_statements_and_storing_the_answer_four(
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Any,
    db: Database,
    statements: list[str],
) -> None:
    study_id = make_study([passage("p0", 1, n=2)], {"annotations_per_item": 1,
                                                    "attention_rate": 0.0})  # fmt: skip
    who = join(client, auth, external_id="ada")
    view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
    path = f"/api/work/assignments/{view['assignment_id']}/step"

    statements.clear()
    reveal = client.post(path, json={"step": 0, "choice": "human"}, headers=who)
    assert reveal.status_code == 200 and "feedback" not in reveal.get_json()
    # The assignment, locked, with its item, study and any stored answer; the new progress.
    assert [verb_and_table(s) for s in statements] == [
        "SELECT assignments", "UPDATE assignments"], statements  # fmt: skip
    assert "JOIN items" in statements[0] and "JOIN studies" in statements[0]

    statements.clear()
    store = client.post(path, json={"step": 1, "choice": "machine"}, headers=who)
    assert store.status_code == 200 and store.get_json()["answered"] is True
    # The same load; the response, the assignment's state and the outbox row, in one
    # transaction; the reply's feedback from the response in memory, not read back.
    assert sorted(verb_and_table(s) for s in statements) == [
        "INSERT outbox", "INSERT responses", "SELECT assignments", "UPDATE assignments",
    ], statements  # fmt: skip

    statements.clear()
    again = client.post(path, json={"step": 1, "choice": "machine"}, headers=who)
    assert again.get_json() == store.get_json()
    # A repeated submission reads the assignment and its answer, and changes nothing.
    assert [verb_and_table(s) for s in statements] == [
        "SELECT assignments", "SELECT responses"], statements  # fmt: skip
    with db.session() as session:
        assert session.scalars(select(Response)).one().answer == {"guess": 1, "all_human": False}
        assert session.scalars(select(Assignment)).one().state == "submitted"
        assert len(session.scalars(select(OutboxEvent)).all()) == 1


def test_a_repeat_that_waited_on_the_lock_sees_the_answer_stored_meanwhile(
    client: FlaskClient, auth: dict[str, str], make_study: Any, db: Database
) -> None:
    """Two submissions of the last step at once: the second waits on the assignment's lock
    and then gets the stored result, not "ask for a new one" (on PostgreSQL an answer joined
    into the locking statement would be read as of before the wait)."""
    study_id = make_study([passage("p0", 1, n=2)], {"annotations_per_item": 1,
                                                    "attention_rate": 0.0})  # fmt: skip
    who = join(client, auth, external_id="ada")
    view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
    assignment_id = view["assignment_id"]
    client.post(f"/api/work/assignments/{assignment_id}/step",
                json={"step": 0, "choice": "human"}, headers=who)  # fmt: skip
    with db.session() as session:
        worker_id = session.scalars(select(Worker.id)).one()
    last = {"step": 1, "choice": "machine"}
    second: dict[str, Any] = {}

    def submit_again() -> None:
        try:
            with db.session() as session:
                assignment = work.act(session, assignment_id, worker_id, last)
                second["view"] = work.assignment_view(session, assignment)
        except Exception as error:  # noqa: BLE001 (reported by the assertion below)
            second["error"] = error

    with db.session() as session:
        work.act(session, assignment_id, worker_id, last)
        session.flush()
        waiting = threading.Thread(target=submit_again)
        waiting.start()
        time.sleep(0.5)  # the second submission reaches the lock and waits
    waiting.join(timeout=30)
    assert "error" not in second, second
    assert second["view"]["answered"] is True
    with db.session() as session:
        assert len(session.scalars(select(Response)).all()) == 1
        assert len(session.scalars(select(OutboxEvent)).all()) == 1


def test_a_boundary_answer_is_at_most_ten_statements_next_among_them_four(
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Any,
    db: Database,
    statements: list[str],
) -> None:
    """The three requests of one answer, once the worker's QC standing is there (the queue's
    refresh after their first answer writes it): next is the study, what serving decides on
    (the worker locked), the item taken and the assignment."""
    from crowd.quality.standing import standing

    items = [passage(f"p{i}", 1, n=2) for i in range(4)]
    study_id = make_study(items, {"annotations_per_item": 1, "attention_rate": 0.0})
    who = join(client, auth, external_id="ada")
    with db.session() as session:
        worker_id = session.scalars(select(Worker.id)).one()
        standing(session, study_id, worker_id).evidence = {"gold_rate": 0.0}
    counters = []
    for n in range(3):
        statements.clear()
        view = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who).get_json()
        served = [first_table(s) for s in statements]
        assert served == ["SELECT studies", "SELECT workers", "UPDATE items",
                          "INSERT assignments"], statements  # fmt: skip
        assert "FROM items" in statements[2]  # the pick is inside the update
        counters.append((view["item_number"], view["items_total"]))
        # The open assignment again: the study and the same one statement, nothing written.
        statements.clear()
        again = client.post(f"/api/work/studies/{study_id}/next", json={}, headers=who)
        assert again.get_json()["assignment_id"] == view["assignment_id"]
        assert [first_table(s) for s in statements] == ["SELECT studies", "SELECT workers"]
        assert (again.get_json()["item_number"], again.get_json()["items_total"]) == counters[-1]
        path = f"/api/work/assignments/{view['assignment_id']}/step"
        client.post(path, json={"step": 0, "choice": "human"}, headers=who)
        stepped = len(statements)
        client.post(path, json={"step": 1, "choice": "machine"}, headers=who)
        assert len(served) + len(statements) - 2 <= 10, n  # less the repeated next's two
        assert stepped - 2 == 2
    assert counters == [(1, 4), (2, 4), (3, 4)]
    with db.session() as session:
        holders = session.scalars(select(Item.holders).order_by(Item.id)).all()
        assert holders == [1, 1, 1, 0]
