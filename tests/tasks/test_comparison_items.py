"""The comparison HIT's pure unit tests: validation, config, display order, overlap planning,
feedback, score and import."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from typing import Any

import pytest

from crowd.exceptions import InvalidAction, InvalidConfig, InvalidItem
from tasks.base import ItemSpec, StudyOptions
from tasks.comparison.hit import THANKS, draw_order
from tasks.comparison.items import TEMPLATES, canonical_index, overlap_count, shown_position
from tests.tasks.comparison_helpers import CONFIG, HIT, NOW, item, json_keys

# -- validation -------------------------------------------------------------------------------


def test_valid_item_splits_content_expected_and_meta() -> None:
    spec = HIT.validate_item(item("g1", kind="gold", best=2, meta={"utility": [0, 1, 2, 3]}))
    assert spec.content == {
        "query": "Query of g1:",
        "candidates": [f"g1-cand{i} text" for i in range(4)],
    }
    assert spec.expected == {"best": 2}
    assert spec.meta == {
        "utility": [0, 1, 2, 3],
        "policies": ["policyA", "policyA", "policyB", "policyB"],
    }
    assert spec.kind == "gold"
    # Plain strings with a parallel policies list are the same item.
    plain = HIT.validate_item(
        {"id": "p", "query": "q", "candidates": ["x", "y"], "policies": ["A", "B"]}
    )
    assert plain.content == {"query": "q", "candidates": ["x", "y"]}
    assert plain.meta["policies"] == ["A", "B"]
    assert HIT.validate_item({"id": 7, "query": "q", "candidates": ["x", "y"]}).meta == {
        "policies": [None, None]
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, r"unknown keys \['colour'\]"),
        ({"id": " "}, "needs an 'id'"),
        ({"kind": "bonus"}, "'kind' must be real, gold, attention or training"),
        ({"query": ""}, "'query'"),
        ({"candidates": ["only one"]}, "'candidates' must be a list of 2 to 8"),
        ({"candidates": [f"c{i}" for i in range(9)]}, "'candidates' must be a list of 2 to 8"),
        ({"candidates": ["same", "same"]}, "candidate texts must all differ"),
        ({"candidates": [{"text": "a", "model": "x"}, "b"]}, r"candidate 0 has unknown keys"),
        ({"candidates": [{"text": ""}, "b"]}, "candidate 0 needs a non-empty 'text'"),
        ({"candidates": ["a", "b"], "policies": ["A"]}, "one policy name per candidate"),
        (
            {"candidates": [{"text": "a", "policy": "A"}, "b"], "policies": ["A", "B"]},
            "use one of them",
        ),
        ({"best": 1}, "a real item carries no 'best'"),
        ({"kind": "gold"}, "a gold item needs 'best'"),
        ({"kind": "training", "best": 4}, "0 to 3"),
        ({"kind": "attention", "best": True}, "needs 'best'"),
        ({"meta": {"utility": [1, 2]}}, "'meta.utility' must list 4 numbers"),
        ({"meta": "x"}, "'meta' must be an object"),
        ({"category": 3}, "'category' must be text"),
    ],
)
def test_invalid_items_name_the_item_and_the_field(change: dict[str, Any], message: str) -> None:
    record = {**item("bad"), **change}
    with pytest.raises(InvalidItem, match=message) as error:
        HIT.validate_item(record, where="line 3")
    assert str(error.value).startswith("line 3")


def test_config_defaults_and_errors() -> None:
    options = HIT.validate_config(None)
    assert options.annotations_per_item == 1
    assert options.extra == {
        "template": None,
        "instructions": None,
        "overlap_share": 0.05,
        "overlap_workers": 5,
        "expert_groups": ["expert"],
        "reward_model": {"retrain_every": None, "labels": "raw", "settings": {}},
    }
    with pytest.raises(InvalidConfig, match="overlap_workers, expert_groups") as error:
        HIT.validate_config({"templat": "sentiment"})
    assert "templat" in str(error.value)
    for bad in (
        {"template": "poetry"},
        {"instructions": ""},
        {"overlap_share": 1.5},
        {"overlap_share": True},
        {"overlap_workers": 1},
        {"expert_groups": ["crowd"]},
        {"expert_groups": "expert"},
        {"reward_model": {"retrain_every": 0}},
        {"reward_model": {"labels": "mace"}},
        {"reward_model": {"settings": {"learning_rate": 2}}},
        {"reward_model": {"settings": {"lr": 1e-5}}},
        {"reward_model": {"every": 5}},
    ):
        with pytest.raises(InvalidConfig):
            HIT.validate_config(bad)


@pytest.mark.parametrize(
    ("template", "phrases"),
    [
        ("sentiment", ["most positive and happy", "Sexual or offensive", "strongly negative"]),
        ("descriptiveness", ["most vividly descriptive", "physical details only"]),
        ("summarization", ["useful", "accurate", "on its own", "not in the text", "verbatim"]),
    ],
)
def test_templates_give_the_papers_instructions(template: str, phrases: list[str]) -> None:
    config = HIT.validate_config({"template": template}).to_config()
    spec = HIT.validate_item(item("t"))
    view = HIT.view(spec.content, HIT.start(spec.content, NOW, config).progress, config)
    assert view["instructions"] == TEMPLATES[template]
    for phrase in phrases:
        assert phrase in view["instructions"]
    custom = HIT.validate_config({"template": template, "instructions": "Pick the funniest."})
    assert HIT.view(spec.content, {"step": 0, "order": [0, 1, 2, 3]}, custom.to_config())[
        "instructions"
    ] == ("Pick the funniest.")


# -- display order ----------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 4])
def test_every_display_order_maps_the_clicked_text_back_to_its_canonical_index(k: int) -> None:
    spec = HIT.validate_item(item("o", k=k))
    texts = spec.content["candidates"]
    orders = list(itertools.permutations(range(k)))
    assert len(orders) == (24 if k == 4 else 2)
    for order in orders:
        progress = {"step": 0, "order": list(order)}
        view = HIT.view(spec.content, progress, CONFIG)
        assert sorted(view["candidates"]) == sorted(texts) and view["k"] == k
        for position, clicked in enumerate(view["candidates"]):
            result = HIT.step(spec.content, progress, {"step": 0, "choice": position}, NOW, CONFIG)
            assert result.answer is not None
            assert texts[result.answer["best"]] == clicked
            assert result.answer["shown"] == position
            assert result.answer["order"] == list(order)
            assert canonical_index(order, position) == texts.index(clicked)
            assert shown_position(order, result.answer["best"]) == position


def test_start_draws_every_order_and_view_hides_order_and_provenance() -> None:
    spec = HIT.validate_item(item("s"))
    seen = Counter(
        tuple(HIT.start(spec.content, NOW, CONFIG).progress["order"]) for _ in range(3000)
    )
    assert set(seen) == set(itertools.permutations(range(4)))
    first = HIT.start(spec.content, NOW, CONFIG)
    assert first.progress["step"] == 0 and first.event["type"] == "shown"
    view = HIT.view(spec.content, first.progress, CONFIG)
    assert set(view) == {"step", "k", "instructions", "query", "candidates"}
    assert "policy" not in json.dumps(view)
    assert draw_order(3, random.Random(1)) == draw_order(3, random.Random(1))


@pytest.mark.parametrize("choice", [-1, 4, "1", 1.0, True, None])
def test_bad_choices_are_refused(choice: Any) -> None:
    spec = HIT.validate_item(item("c"))
    with pytest.raises(InvalidAction, match="position of the candidate you pick, 0 to 3"):
        HIT.step(spec.content, {"step": 0, "order": [3, 2, 1, 0]}, {"choice": choice}, NOW, {})


# -- overlap planning -------------------------------------------------------------------------


def _specs(n_real: int) -> list[ItemSpec]:
    records = [item(f"r{i:03d}") for i in range(n_real)]
    records += [item("g", kind="gold", best=0), item("t", kind="training", best=1)]
    return [HIT.validate_item(record) for record in records]


def _options(**extra: Any) -> StudyOptions:
    return HIT.validate_config(extra)


@pytest.mark.parametrize(
    ("n_real", "share", "expected"),
    [(40, 0.05, 2), (100, 0.05, 5), (10, 0.05, 1), (50, 0.05, 3), (7, 0.5, 4), (20, 0.0, 0)],
)
def test_overlap_picks_a_share_of_real_items_for_several_workers(
    n_real: int, share: float, expected: int
) -> None:
    assert overlap_count(share, n_real) == expected
    planned = HIT.plan_items(_specs(n_real), _options(overlap_share=share))
    overlap = [spec for spec in planned if spec.target is not None]
    assert len(overlap) == expected
    assert all(spec.kind == "real" and spec.target == 5 for spec in overlap)
    # Deterministic given the ids, whatever the order of the import.
    again = HIT.plan_items(list(reversed(_specs(n_real))), _options(overlap_share=share))
    assert {s.external_id for s in again if s.target} == {s.external_id for s in overlap}


def test_overlap_target_never_lowers_annotations_per_item() -> None:
    planned = HIT.plan_items(
        _specs(20), _options(overlap_workers=3, annotations_per_item=4, overlap_share=0.1)
    )
    assert sorted(spec.target for spec in planned if spec.target) == [4, 4]
    assert overlap_count(0.05, 0) == 0


# -- feedback, score, import ------------------------------------------------------------------


def test_training_feedback_reveals_the_label_only_after_the_answer() -> None:
    spec = HIT.validate_item(item("tr", kind="training", best=2))
    progress = {"step": 0, "order": [2, 0, 3, 1]}
    view = HIT.view(spec.content, progress, CONFIG)
    assert "best" not in json_keys(view) and "policyA" not in json.dumps(view)
    wrong = HIT.step(spec.content, progress, {"step": 0, "choice": 1}, NOW, CONFIG).answer
    right = HIT.step(spec.content, progress, {"step": 0, "choice": 0}, NOW, CONFIG).answer
    assert wrong is not None and right is not None and right["best"] == 2
    missed = HIT.feedback(spec.content, spec.expected, wrong, "training", CONFIG)
    assert missed["training"] is True and missed["correct"] is False
    assert missed["right_text"] == "tr-cand2 text" and missed["chosen_text"] == "tr-cand0 text"
    hit = HIT.feedback(spec.content, spec.expected, right, "training", CONFIG)
    assert hit["correct"] is True and hit["right_text"] == "tr-cand2 text"
    assert HIT.score(spec.expected, wrong) == 0.0 and HIT.score(spec.expected, right) == 1.0


def test_real_gold_and_attention_feedback_look_the_same() -> None:
    answer = {"best": 1, "shown": 0, "order": [1, 0, 2, 3]}
    content = HIT.validate_item(item("x")).content
    feedbacks = [
        HIT.feedback(content, expected, answer, kind, CONFIG)
        for kind, expected in (
            ("real", {}),
            ("gold", {"best": 1}),
            ("gold", {"best": 3}),
            ("attention", {"best": 0}),
        )
    ]
    assert all(feedback == {"message": THANKS} for feedback in feedbacks)
    assert HIT.score({}, answer) is None
    assert HIT.passed_attention({"best": 1}, answer) is True
    assert HIT.passed_attention({"best": 0}, answer) is False


def test_import_answer_takes_an_index_or_the_text() -> None:
    content = HIT.validate_item(item("im")).content
    expected = {"best": 2, "shown": None, "order": None}
    assert HIT.import_answer(content, {"best": 2}, CONFIG) == expected
    assert HIT.import_answer(content, {"best": " 2 "}, CONFIG) == expected
    assert HIT.import_answer(content, {"best_text": "im-cand2 text"}, CONFIG) == expected
    assert HIT.import_answer(content, {"best": "2", "best_text": "im-cand2 text"}, CONFIG) == (
        expected
    )
    for raw, field, message in (
        ({"best": "two"}, "best", "0-based index"),
        ({"best": 4}, "best", "outside 0..3"),
        ({"best": "-1"}, "best", "outside 0..3"),
        ({"best_text": "nope"}, "best_text", "exact text"),
        ({"best": 1, "best_text": "im-cand2 text"}, "best", "disagree"),
        ({}, "best", "give 'best'"),
    ):
        with pytest.raises(InvalidItem, match=message) as error:
            HIT.import_answer(content, raw, CONFIG)
        assert error.value.where == field
