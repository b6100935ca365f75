"""Which questions each aggregation method runs on: HitType.label_applies, as labels.py uses it
to pick the (task, worker, label) triples of each method -- the form type's own (ordinal_mean
on its rating fields only), and a real form study aggregated, scored on gold and promoted."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from flask.testing import FlaskClient
from sqlalchemy import select

from crowd.quality import labels
from crowd.quality import standing as quality
from crowd.storage import Database, Item, ItemKind, Response, Study
from qc.aggregation import aggregate
from tasks.form.hit import FormHit
from tasks.likert.hit import LikertHit
from tests.conftest import join
from tests.tasks.form_helpers import sample_config
from tests.tasks.test_form_flow import create, next_view
from tests.tasks.test_form_quality import answer, form_item

LABELLED: list[tuple[str, str, str, Hashable]] = [
    ("s1", "fluency", "w1", 4),
    ("s1", "verdict", "w1", "human"),
    ("s1", "fluency", "w2", 5),
    ("s1", "verdict", "w2", "machine"),
    ("s2", "fluency", "w1", 2),
]


def test_every_method_takes_every_question_by_default() -> None:
    triples = labels.method_triples(LikertHit(), "ordinal_mean", LABELLED, {})
    assert triples == [(f"{item}/{q}", worker, label) for item, q, worker, label in LABELLED]


def test_a_form_keeps_ordinal_mean_to_its_rating_fields() -> None:
    hit = FormHit()
    config = hit.validate_config(sample_config()).to_config()
    form_labels: list[tuple[str, str, str, Hashable]] = [
        ("s1", "faithfulness", "w1", 4),
        ("s1", "problems", "w1", "missing|other"),
        ("s1", "strengths", "w1", 2),
        ("s1", "faithfulness", "w2", 5),
        ("s1", "problems", "w2", ""),
        ("s1", "strengths", "w2", 0),
        ("s2", "faithfulness", "w1", 2),
    ]
    assert [hit.label_applies("ordinal_mean", f["id"], config) for f in config["fields"]] == [
        True, False, False, False,
    ]  # fmt: skip
    ordinal = labels.method_triples(hit, "ordinal_mean", form_labels, config)
    assert ordinal == [
        ("s1/faithfulness", "w1", 4), ("s1/faithfulness", "w2", 5), ("s2/faithfulness", "w1", 2),
    ]  # fmt: skip
    # The filtered triples aggregate; all of them would not (a category's text is no rating).
    assert aggregate("ordinal_mean", ordinal).labels == {"s1/faithfulness": 5, "s2/faithfulness": 2}
    assert len(labels.method_triples(hit, "majority_vote", form_labels, config)) == 7
    # A study without fields of its own (every item brings them): no field is known a rating.
    assert labels.method_triples(hit, "ordinal_mean", form_labels, {"fields": None}) == []


GOLD = {"faithfulness": 5, "problems": [], "strengths": [2, 0, 1]}
AGREED = {"faithfulness": 4, "problems": ["missing"], "strengths": [1, 2, 0]}
# The dissenter's answer to the real item: another rating and problem, another full order
# with the same thing first.
DISSENT = {"faithfulness": 2, "problems": ["unclear"], "strengths": [1, 0, 2]}
WRONG_GOLD = {"faithfulness": 1, "problems": ["invented"], "strengths": [0, 1, 2]}


def test_a_form_study_is_aggregated_per_field_scored_on_gold_and_promoted(
    client: FlaskClient, auth: dict[str, str], db: Database
) -> None:
    items = [form_item(f"g{n}", "gold", expected=GOLD) for n in range(4)] + [form_item("r")]
    config = {
        **sample_config(),
        "annotations_per_item": 4,
        "attention_rate": 0.0,
        "qc": {"gold": {"min_rate": 1.0, "max_rate": 1.0}},  # gold first, at every chance
    }
    study_id = create(client, auth, config, items)
    for name in ("t1", "t2", "t3", "u"):
        who = join(client, auth, external_id=name)
        for _ in range(4):
            view = next_view(client, who, study_id)
            assert view["task"]["attachments"][0]["content"].startswith("Summary g")
            answer(client, who, view, GOLD if name != "u" else WRONG_GOLD, sim_seconds=30)
        view = next_view(client, who, study_id)
        assert view["task"]["attachments"][0]["content"] == "Summary r."
        answer(client, who, view, AGREED if name != "u" else DISSENT, sim_seconds=30)

    def aggregations() -> dict[str, dict[str, Any]]:
        with db.session() as session:
            study = session.get(Study, study_id)
            assert study is not None
            summary, results = labels.compute_aggregations(session, study, filtered=False)
            assert all(
                "error" not in part and not part["question_errors"] for part in summary.values()
            ), summary
            return results

    results = aggregations()
    majority = results["majority_vote"]
    expected_labels = {
        "faithfulness": 5, "problems": "", "strengths": 2,  # a rank's label: its top index
    }  # fmt: skip
    for n in range(4):
        for field, label in expected_labels.items():
            assert majority["labels"][f"g{n}/{field}"] == label
    assert majority["labels"]["r/faithfulness"] == 4
    assert majority["labels"]["r/problems"] == "missing"
    assert majority["labels"]["r/strengths"] == 1
    assert not any(task.endswith("/other problem") for task in majority["labels"])  # text
    assert majority["gold_accuracy"] == 1.0  # every gold field's majority is its gold
    assert set(results["ordinal_mean"]["labels"]) == {
        f"{item}/faithfulness" for item in ("g0", "g1", "g2", "g3", "r")
    }
    # The mean of 5, 5, 5 and the dissenter's 1 is off the gold's 5, unlike the majority.
    assert results["ordinal_mean"]["labels"]["g0/faithfulness"] == 4
    assert results["ordinal_mean"]["gold_accuracy"] == 0.0

    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        quality.refresh_study(session, study)
    with db.session() as session:
        study = session.get(Study, study_id)
        assert study is not None
        assert labels.trusted_workers(session, study) == {"sim:t1", "sim:t2", "sim:t3"}
        promoted = labels.promote(session, study)
    # The agreed labels become the gold: the rank by its top index alone.
    assert promoted == {
        "r": {
            "expected": {"faithfulness": 4, "problems": ["missing"], "strengths": 1},
            "tolerance": {},
        }
    }
    with db.session() as session:
        item = session.scalars(select(Item).where(Item.external_id == "r")).one()
        assert item.kind == ItemKind.GOLD
        scored = sorted(
            response.qc_flags["gold_accuracy"]
            for response in session.scalars(select(Response).where(Response.item_id == item.id))
        )
    # The dissenter's order [1, 0, 2] puts the same thing first: that field counts as matched.
    assert scored == [1 / 3, 1.0, 1.0, 1.0]
    results = aggregations()
    assert results["majority_vote"]["gold_accuracy"] == 1.0  # now over r's fields as well
