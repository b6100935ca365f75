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


def test_a_careful_worker_who_meets_hard_gold_is_judged_on_what_it_shows(
    client: FlaskClient, auth: dict[str, str], make_study: Callable[..., int], db: Database
) -> None:
    records = [comparison_item(item, kind="gold", best=int(item[-1])) for item in EASY + HARD]
    records += [comparison_item(f"real{n}") for n in range(4)]
    gold = {"min_rate": 1.0, "max_rate": 1.0}
    config = {"template": "sentiment", "overlap_share": 0, "qc": {"gold": gold}}
    study_id = make_study(records, config, hit_type="comparison")
    # Twelve readers: right on every easy item, on a hard one a quarter of the time.
    for n in range(12):
        reader = join(client, auth, external_id=f"reader{n}")
        assert play_gold(client, reader, study_id, lambda i, n=n: i in EASY or
                         (n + int(i[-1])) % 4 == 0) == 8  # fmt: skip
    # Right on one easy item of eight: the hard misses are what readers do too.
    unlucky = join(client, auth, external_id="unlucky")
    assert play_gold(client, unlucky, study_id, lambda i: i == "easy0") == 8
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
    assert row.evidence["gold_accuracy"] == 0.0 and row.evidence["gold_below_prob"] > 0.95
    assert row.excluded_by == "rule:gold_below_threshold"

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
