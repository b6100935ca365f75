"""The live gold rule weighs each gold item by its difficulty, read off the study's readers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from flask.testing import FlaskClient

from crowd.quality import standing as quality
from crowd.quality.exclusion import study_qc
from crowd.storage import Database, Study
from tests.conftest import join
from tests.crowd.quality.test_standing import (
    comparison_item,
    next_view,
    pick,
    refresh,
    standing_of,
    worker_id,
)

EASY, HARD = [f"easy{g}" for g in range(4)], [f"hard{g}" for g in range(4)]


def play_gold(
    client: FlaskClient, who: dict[str, str], study_id: int, right: Callable[[str], bool]
) -> int:
    """Answer the eight gold items (served first, at a gold rate of 1): the best candidate
    where `right(item)`, else another."""
    played = 0
    while played < 8 and "task" in (view := next_view(client, who, study_id)):
        item = view["task"]["query"].removeprefix("Query of ").removesuffix(":")
        best = int(item[-1])  # the items' best candidate is their number
        choice = best if right(item) else (best + 1) % 4
        pick(client, who, view, f"{item}-cand{choice} text")
        played += 1
    return played


GOLD_FIRST = {"template": "sentiment", "overlap_share": 0,
              "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}}}  # fmt: skip


def hard_gold_study(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int]
) -> int:
    """A comparison study of four easy and four hard gold items (and four real ones), played
    by twelve readers: right on every easy item, on a hard one a quarter of the time."""
    records = [comparison_item(item, kind="gold", best=int(item[-1])) for item in EASY + HARD]
    records += [comparison_item(f"real{n}") for n in range(4)]
    study_id = make_study(records, GOLD_FIRST, hit_type="comparison")
    for n in range(12):
        reader = join(client, auth, external_id=f"reader{n}")
        assert play_gold(client, reader, study_id, lambda i, n=n: i in EASY or
                         (n + int(i[-1])) % 4 == 0) == 8  # fmt: skip
    return study_id


def unlucky_reader(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int]
) -> tuple[int, dict[str, str]]:
    """`hard_gold_study`, and a reader who got one easy item of the eight right: the hard
    misses are what readers do too."""
    study_id = hard_gold_study(client, auth, make_study)
    unlucky = join(client, auth, external_id="unlucky")
    assert play_gold(client, unlucky, study_id, lambda i: i == "easy0") == 8
    return study_id, unlucky


def test_a_careful_worker_who_meets_hard_gold_is_judged_on_what_it_shows(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id, _ = unlucky_reader(client, auth, make_study)
    # The same score, right on a hard item: the four easy misses count in full.
    careless = join(client, auth, external_id="careless")
    assert play_gold(client, careless, study_id, lambda i: i == "hard0") == 8
    # Wrong on all eight.
    clicker = join(client, auth, external_id="clicker")
    assert play_gold(client, clicker, study_id, lambda i: False) == 8

    kept, doubted = worker_id(db, "unlucky"), worker_id(db, "careless")
    stopped = worker_id(db, "clicker")
    for wid in (kept, doubted, stopped):
        refresh(db, study_id, wid)
    row = standing_of(db, study_id, kept)
    assert row.evidence["gold_n"] == 8 and row.evidence["gold_accuracy"] == 0.125
    assert 4 < row.evidence["gold_weight"] < 6.5
    assert row.evidence["gold_below_prob"] < 0.9
    assert "gold_below_threshold" not in row.rule_hits
    row = standing_of(db, study_id, doubted)
    assert row.evidence["gold_accuracy"] == 0.125 and row.evidence["gold_below_prob"] > 0.94
    row = standing_of(db, study_id, stopped)
    # Four easy misses in full and four hard ones at little: 0.955, short of the gold rule's
    # 0.98, but every answer at chance stops them as not reading.
    assert row.evidence["gold_accuracy"] == 0.0 and 0.95 < row.evidence["gold_below_prob"] < 0.98
    assert row.excluded_by == "rule:stopped_reading"

    # Counted in full, the unlucky reader's 1 of 8 would have stopped them (P = 0.955).
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        qc = study_qc(study)
        assert (qc.gold.chance, qc.gold.by_difficulty) == (0.25, True)
        plain = replace(qc, gold=replace(qc.gold, by_difficulty=False))
        model = quality.pooled_gold(session, [kept], study, plain)
        assert model.weight(str(kept)) == 8
        assert model.prob_below(str(kept), qc.gold.threshold) > 0.95
        model = quality.pooled_gold(session, [doubted], study, plain)
        assert model.prob_below(str(doubted), qc.gold.threshold) > 0.95


def test_gold_met_in_another_study_is_weighed_by_that_studys_readers(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    # The unlucky reader met the hard gold in a first study; a second study of the same type
    # and experimenter judges them on their pooled gold, weighed by the first study's readers.
    _, unlucky = unlucky_reader(client, auth, make_study)
    second = make_study([comparison_item(f"other{n}") for n in range(3)], GOLD_FIRST,
                        hit_type="comparison")  # fmt: skip
    view = next_view(client, unlucky, second)
    pick(client, unlucky, view, view["task"]["candidates"][0])
    wid = worker_id(db, "unlucky")
    refresh(db, second, wid)
    row = standing_of(db, second, wid)
    assert row.evidence["gold_n"] == 8 and row.evidence["gold_accuracy"] == 0.125
    assert 4 < row.evidence["gold_weight"] < 6.5 and row.evidence["gold_below_prob"] < 0.9
    assert row.excluded_by is None


def test_a_study_stored_before_gold_knew_its_chance_gets_its_types(
    auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    study_id = make_study([comparison_item("real0")], GOLD_FIRST, hit_type="comparison")
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        stored = study.config["qc"]["gold"]
        assert (stored["chance"], stored["by_difficulty"]) == (0.25, True)
        # As a study created before 2026-11-29 stored it.
        gold = {k: v for k, v in stored.items() if k not in ("chance", "by_difficulty")}
        study.config = {**study.config, "qc": {**study.config["qc"], "gold": gold}}
        session.flush()
        qc = study_qc(study)
        assert (qc.gold.chance, qc.gold.by_difficulty, qc.gold.min_rate) == (0.25, True, 1.0)
