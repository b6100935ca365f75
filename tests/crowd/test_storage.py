"""Schema migrations, the assignment state machine and the database's own guarantees."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sqlalchemy import inspect, select
from sqlalchemy.exc import IntegrityError

from crowd.exceptions import InvalidTransition
from crowd.storage import (
    Assignment,
    AssignmentState,
    Database,
    Experimenter,
    Item,
    Response,
    Study,
    Worker,
)
from crowd.storage.db import load_json

TABLES = {
    "experimenters",
    "api_keys",
    "studies",
    "items",
    "workers",
    "assignments",
    "responses",
    "outbox",
    "reports",
    "alembic_version",
}


def _urls(tmp_path: Path) -> list[str]:
    urls = [f"sqlite:///{tmp_path / 'fresh.db'}"]
    if os.environ.get("CROWD_TEST_DATABASE_URL"):
        urls.append(os.environ["CROWD_TEST_DATABASE_URL"])
    return urls


def test_migrations_upgrade_an_empty_database(tmp_path: Path, database_url: str) -> None:
    # database_url is reset (PostgreSQL) or fresh (SQLite) by its fixture.
    for url in {*_urls(tmp_path), database_url}:
        db = Database(url)
        db.upgrade()
        assert set(inspect(db.engine).get_table_names()) >= TABLES
        db.downgrade("base")
        assert set(inspect(db.engine).get_table_names()) <= {"alembic_version"}
        db.upgrade()
        db.dispose()


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'wal.db'}")
    with db.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    db.dispose()


def _seed(db: Database) -> tuple[int, int, int]:
    with db.session() as session:
        experimenter = Experimenter(name="e")
        session.add(experimenter)
        session.flush()
        study = Study(experimenter_id=experimenter.id, name="s", hit_type="boundary")
        session.add(study)
        session.flush()
        item = Item(study_id=study.id, external_id="i", content={}, expected={"boundary": 1})
        worker = Worker(provider="sim", external_id="w")
        session.add_all([item, worker])
        session.flush()
        return study.id, item.id, worker.id


def test_a_worker_answers_an_item_at_most_once(db: Database) -> None:
    study_id, item_id, worker_id = _seed(db)
    with db.session() as session:
        session.add(Response(study_id=study_id, item_id=item_id, worker_id=worker_id, answer={}))
    with pytest.raises(IntegrityError), db.session() as session:
        session.add(Response(study_id=study_id, item_id=item_id, worker_id=worker_id, answer={}))


def test_a_worker_gets_an_item_at_most_once(db: Database) -> None:
    study_id, item_id, worker_id = _seed(db)
    with db.session() as session:
        session.add(
            Assignment(
                study_id=study_id,
                item_id=item_id,
                worker_id=worker_id,
                provider="sim",
                state=AssignmentState.RETURNED,
            )
        )
    with pytest.raises(IntegrityError), db.session() as session:
        session.add(
            Assignment(study_id=study_id, item_id=item_id, worker_id=worker_id, provider="sim")
        )


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        (["submitted", "approved"], True),
        (["submitted", "rejected", "approved"], True),
        (["returned"], True),
        (["abandoned"], True),
        (["expired"], True),
        (["approved"], False),
        (["submitted", "returned"], False),
        (["returned", "assigned"], False),
        (["submitted", "approved", "rejected"], False),
    ],
)
def test_assignment_state_machine(db: Database, path: list[str], allowed: bool) -> None:
    study_id, item_id, worker_id = _seed(db)
    with db.session() as session:
        assignment = Assignment(
            study_id=study_id,
            item_id=item_id,
            worker_id=worker_id,
            provider="sim",
            state=AssignmentState.ASSIGNED,
        )
        session.add(assignment)
        session.flush()
        if allowed:
            for state in path:
                assignment.transition(AssignmentState(state))
            assert assignment.state == path[-1]
        else:
            with pytest.raises(InvalidTransition):
                for state in path:
                    assignment.transition(AssignmentState(state))


def test_timestamps_come_back_in_utc(db: Database) -> None:
    _seed(db)
    with db.session() as session:
        worker = session.scalars(select(Worker)).one()
        assert worker.created_at.tzinfo is not None
        assert worker.created_at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


def test_stored_json_comes_back_exactly_as_the_standard_library_reads_it(db: Database) -> None:
    # Read with orjson, but where it would differ (a number beyond 64 bits, which it turns
    # into a float) as json.loads reads it.
    content = {
        "id": 123456789012345678901234567890,
        "low": -9223372036854775809,
        "text": "caf\u00e9 \U0001f600",
        "nested": [1, 2.5, None, True, {"k": "v"}],
    }
    study_id, _, _ = _seed(db)
    with db.session() as session:
        session.add(Item(study_id=study_id, external_id="odd", content=content, expected={}))
    with db.read_session() as session:
        stored = session.scalars(select(Item.content).where(Item.external_id == "odd")).one()
    assert stored == content
    assert isinstance(stored["id"], int) and isinstance(stored["low"], int)
    # What SQLite may hold from json.dumps, and orjson refuses: NaN, Infinity and an
    # unpaired surrogate (PostgreSQL refuses them in the first place).
    nan, inf = load_json('{"a": NaN, "b": Infinity}').values()
    assert nan != nan and inf == float("inf")
    assert load_json(json.dumps({"s": "\ud800"}).encode()) == {"s": "\ud800"}


def test_a_downgrade_keeps_the_answers_and_the_keys(db: Database) -> None:
    # SQLite rebuilds a table to drop a column; with its foreign keys on, dropping `items`
    # under `responses` failed (0017's and 0002's downgrades on any database with answers).
    study_id, item_id, worker_id = _seed(db)
    with db.session() as session:
        session.add(Response(study_id=study_id, item_id=item_id, worker_id=worker_id, answer={}))
    db.downgrade("0001")
    db.upgrade()
    with db.session() as session:
        assert session.scalars(select(Response.item_id)).all() == [item_id]
        assert session.get(Item, item_id).external_id == "i"
    # The keys hold again on the connections the migration used.
    with pytest.raises(IntegrityError), db.session() as session:
        session.add(Response(study_id=study_id, item_id=item_id + 99, worker_id=worker_id,
                             answer={}))  # fmt: skip
