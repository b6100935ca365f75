"""Gold in one shared order, easy gold first: each gold item keeps a tally of its answers'
gold accuracy, each answer weighed by its reader's agreement with the crowd and recounted in
every QC refresh (crowd.quality.tally), and serving puts the gold its readers got right first
(qc.gold.easy_first)."""

from __future__ import annotations

import doctest
from collections.abc import Callable

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select, update

from crowd.quality import standing as quality
from crowd.quality import tally
from crowd.quality.tally import reader_weight, retally_gold
from crowd.storage import Database, Item, Response, Study, StudyWorker, Worker
from tests.conftest import join, passage
from tests.crowd.quality.test_standing import NO_EXPLANATION, gold_served, play_items

ALWAYS_GOLD = {"min_rate": 1.0, "max_rate": 1.0}


def tallies(db: Database, study_id: int) -> dict[str, tuple[float, float]]:
    with db.session() as session:
        rows = session.execute(
            select(Item.external_id, Item.gold_weight, Item.gold_right).where(
                Item.study_id == study_id, Item.kind == "gold"
            )
        ).all()
    return {name: (weight, right) for name, weight, right in rows}


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


def test_a_readers_weight_is_their_accuracy_above_chance_as_a_share_of_the_way_to_always() -> None:
    result = doctest.testmod(tally)  # reader_weight's examples: a reader, a guesser, nobody
    assert result.failed == 0 and result.attempted >= 2


def refresh(db: Database, study_id: int) -> dict[str, float]:
    """A QC refresh of the whole study; returns each worker's reader weight (by external id)
    from the evidence it stored."""
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        quality.refresh_study(session, study)
    with db.session() as session:
        rows = session.execute(
            select(Worker.external_id, StudyWorker.evidence)
            .join(Worker, Worker.id == StudyWorker.worker_id)
            .where(StudyWorker.study_id == study_id)
        ).all()
    return {name: reader_weight(evidence) for name, evidence in rows}


def test_a_qc_refresh_recounts_the_tally_each_answer_weighed_by_its_reader(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id = two_readers(client, auth, make_study, db)
    # Storing an answer leaves the tally alone: the refresh that judges its worker counts it.
    assert tallies(db, study_id) == {"g0": (0.0, 0.0), "g1": (0.0, 0.0)}
    weight = refresh(db, study_id)
    # The reader right on both gold items reads above chance; the one wrong on both does not.
    assert weight["right"] > 0.2 and weight["wrong"] == 0.0
    # Both workers met both gold items (the rate is 1): each counts with their weight.
    expected = (round(weight["right"] + weight["wrong"], 4), weight["right"])
    assert tallies(db, study_id) == {"g0": expected, "g1": expected}
    with db.session() as session:  # real items keep no tally
        assert session.scalar(select(Item.gold_weight).where(Item.external_id == "r0")) == 0
    # Off easy gold first, the refresh leaves the tally alone (nothing reads it).
    with db.session() as session:
        session.execute(update(Item).values(gold_weight=0.0, gold_right=0.0))
        study = session.get(Study, study_id)
        assert study is not None
        study.config = {**study.config, "qc": {"gold": {**ALWAYS_GOLD, "easy_first": False}}}
    refresh(db, study_id)
    assert tallies(db, study_id) == {"g0": (0.0, 0.0), "g1": (0.0, 0.0)}


def test_a_ring_that_copies_a_lucky_pick_counts_for_what_the_crowd_says_it_reads(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    # Workers 1-3 read (weight 0.8); 4-7 share one pick per item and agree with the crowd
    # at chance (weight 0). The ring was right on g1, and wrong on g0 where the readers
    # were right: counted one answer one vote, g1 (4 of 7) would lead g0 (3 of 7).
    items = [passage("r0", 1, n=3)] + [passage(f"g{i}", 2, n=3, kind="gold") for i in range(2)]
    config = {**NO_EXPLANATION, "annotations_per_item": 7, "qc": {"gold": ALWAYS_GOLD}}
    study_id = make_study(items, config)
    for name in "1234567":  # gold at every chance while real work is left: both gold items
        assert play_items(client, join(client, auth, external_id=name), study_id, 2, 2) == 2
    crowd = {}
    with db.session() as session:
        ids = {name: id_ for name, id_ in session.execute(select(Worker.external_id, Worker.id))}
        for name in "1234567":
            crowd[str(ids[name])] = {"agreement": 0.85 if name in "123" else 0.25,
                                     "agreement_chance": 0.25}  # fmt: skip
        # The stored accuracies as the story tells them (every answer above was right).
        for response in session.scalars(select(Response)):
            gold = session.get(Item, response.item_id)
            assert gold is not None
            ring = response.worker_id in {ids[name] for name in "4567"}
            wrong = (gold.external_id == "g0") == ring
            response.qc_flags = {**response.qc_flags, "gold_accuracy": 0.0 if wrong else 1.0}
        study = session.get(Study, study_id)
        assert study is not None
        assert retally_gold(session, study, crowd) == 2
        assert retally_gold(session, study, crowd) == 0  # nothing changed: nothing written
    # g0: three readers right (0.8 each); g1: three readers wrong, the ring's picks weigh 0.
    assert tallies(db, study_id) == {"g0": (2.4, 2.4), "g1": (2.4, 0.0)}


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
                .values(holders=holders, gold_weight=4.0, gold_right=right)
            )
    who = join(client, auth, external_id="next")
    assert play_items(client, who, study_id, 3, guess=2) == 3
    served = gold_served(db, study_id, "next")
    if easy_first:
        # g4 (4 right of 4, and the study's share, 4 of 12, for two readers: 0.78) leads;
        # then the untried (the study's share, about 1/3), before g1 and g2 (0.11), though
        # more workers hold those.
        assert served[0] == "g4"
        assert set(served[1:]) <= {"g0", "g3", "g5"}
    else:
        assert set(served[:2]) == {"g1", "g2"}  # the most held first


def test_the_migrations_keep_the_tally_of_the_gold_answers_stored_before_them(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    # A database from before the tally (0016) with gold answers: 0017 counts the live ones,
    # and 0018 keeps those counts as the weight (each answer weighing 1) until a refresh.
    study_id = two_readers(client, auth, make_study, db)
    db.downgrade("0016")
    db.upgrade()
    assert tallies(db, study_id) == {"g0": (2.0, 1.0), "g1": (2.0, 1.0)}
