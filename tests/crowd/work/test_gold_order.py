"""Gold in one shared order, easy gold first: each gold item keeps a tally of its answers'
gold accuracy, and serving puts the gold its readers got right first (qc.gold.easy_first)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select, update

from crowd.storage import Database, Item
from crowd.storage.db import MIGRATIONS
from tests.conftest import join, passage
from tests.crowd.quality.test_standing import NO_EXPLANATION, gold_served, play_items

ALWAYS_GOLD = {"min_rate": 1.0, "max_rate": 1.0}


def tallies(db: Database, study_id: int) -> dict[str, tuple[int, float]]:
    with db.session() as session:
        rows = session.execute(
            select(Item.external_id, Item.gold_answers, Item.gold_right).where(
                Item.study_id == study_id, Item.kind == "gold"
            )
        ).all()
    return {name: (answers, right) for name, answers, right in rows}


def two_readers(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> int:
    """A study with gold items g0 and g1 (boundary 4 of 5 sentences) that two workers
    answered, one right (a guess of 4) and one wrong (1: off by more than one sentence)."""
    items = [passage("r0", 1, n=5)] + [passage(f"g{i}", 4, n=5, kind="gold") for i in range(2)]
    study_id = make_study(items, {**NO_EXPLANATION, "qc": {"gold": ALWAYS_GOLD}})
    assert tallies(db, study_id) == {"g0": (0, 0.0), "g1": (0, 0.0)}
    for name, guess in (("right", 4), ("wrong", 1)):
        assert play_items(client, join(client, auth, external_id=name), study_id, 2, guess) == 2
    return study_id


def test_each_gold_answer_stored_raises_its_items_tally(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id = two_readers(client, auth, make_study, db)
    # Both workers met both gold items (the rate is 1): one right answer on each.
    assert tallies(db, study_id) == {"g0": (2, 1.0), "g1": (2, 1.0)}
    with db.session() as session:  # real items keep no tally
        assert session.scalar(select(Item.gold_answers).where(Item.external_id == "r0")) == 0


@pytest.mark.parametrize("easy_first", [True, False])
def test_the_gold_readers_get_right_leads_and_a_hard_item_falls_behind_the_untried(
    client: FlaskClient,
    auth: dict[str, str],
    make_study: Callable[..., int],
    db: Database,
    easy_first: bool,
) -> None:
    items = [passage(f"r{i}", 1, n=3) for i in range(3)]
    items += [passage(f"g{i}", 2, n=3, kind="gold") for i in range(6)]
    gold = {**ALWAYS_GOLD, "easy_first": easy_first}
    study_id = make_study(items, {**NO_EXPLANATION, "qc": {"gold": gold}})
    # Earlier readers: g4 right 4 times of 4, g1 and g2 wrong 4 times of 4, the rest untried.
    # Holders say g1 and g2 lead (every reader of a shared order holds them).
    with db.session() as session:
        for name, holders, right in (("g4", 1, 4.0), ("g1", 5, 0.0), ("g2", 5, 0.0)):
            session.execute(
                update(Item)
                .where(Item.study_id == study_id, Item.external_id == name)
                .values(holders=holders, gold_answers=4, gold_right=right)
            )
    who = join(client, auth, external_id="next")
    assert play_items(client, who, study_id, 3, guess=2) == 3
    served = gold_served(db, study_id, "next")
    if easy_first:
        # g4 (4 right of 4, and the study's share, 4 of 12, for two answers: 0.78) leads;
        # then the untried (the study's share, about 1/3), before g1 and g2 (0.11), though
        # more workers hold those.
        assert served[0] == "g4"
        assert set(served[1:]) <= {"g0", "g3", "g5"}
    else:
        assert set(served[:2]) == {"g1", "g2"}  # the most held first


def test_the_migration_tallies_the_gold_answers_stored_before_it(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    # Migration 0017 adds the tally to a database that has gold answers already: it counts
    # the live ones (the same answers as the first test, their tallies wiped as before 0017).
    study_id = two_readers(client, auth, make_study, db)
    with db.engine.begin() as connection:
        connection.execute(update(Item).values(gold_answers=0, gold_right=0.0))
        migration = _load(MIGRATIONS / "versions" / "0017_items_gold_tally.py")
        migration.backfill(connection)
    assert tallies(db, study_id) == {"g0": (2, 1.0), "g1": (2, 1.0)}


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
