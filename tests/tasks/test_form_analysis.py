"""The form type's per-field analysis: the level of alpha each field kind gets (checked against
`krippendorff` on the raters x units matrix), filtered vs full sets, rater groups and fields
only some items declare."""

from __future__ import annotations

import math
from typing import Any

import krippendorff
import numpy as np
import pytest
from scipy import stats

from tasks.form.analysis import analysis_row, analyze, field_types_of, label_applies

FIELDS: list[dict[str, Any]] = [
    {"id": "quality", "type": "rating", "title": "How good?", "scale": [1, 5]},
    {"id": "topic", "type": "category", "title": "Topic", "choices": ["news", "sport", "art"]},
    {
        "id": "flaws",
        "type": "category",
        "title": "Flaws",
        "choices": [{"label": "Typos", "value": "typo"}, "bias", {"label": "Yes", "value": True}],
        "min_choices": 0,
        "max_choices": 3,
    },
    {"id": "order", "type": "rank", "title": "Best first", "choices": ["a", "b", "c"]},
    {"id": "why", "type": "text", "title": "Why?"},
]
TYPES = field_types_of(FIELDS)

# worker -> item -> (quality, topic, flaws, order, why)
ANSWERS: dict[str, dict[str, tuple[Any, ...]]] = {
    "w1": {
        "i1": (5, ["news"], ["typo"], [0, 1, 2], "fine"),
        "i2": (2, ["sport"], [], [2, 1, 0], "bad text"),
        "i3": (4, ["art"], ["typo", "bias"], [1, 0, 2], "ok"),
    },
    "w2": {
        "i1": (4, ["news"], ["typo", "true"], [0, 2, 1], "good"),
        "i2": (1, ["sport"], ["bias"], [2, 0, 1], None),
        "i3": (4, ["news"], ["bias"], [1, 0, 2], "okay then"),
    },
    "w3": {
        "i1": (5, ["art"], [], [1, 0, 2], "x"),
        "i2": (3, ["sport"], ["bias", "true"], [2, 1, 0], "y"),
    },
}


def row(
    n: int, worker: str, item: str, values: tuple[Any, ...], group: str = "crowd", **extra: Any
) -> dict[str, Any]:
    names = [f["id"] for f in FIELDS]
    return {
        "response_id": n,
        "worker": worker,
        "rater_group": group,
        "item": item,
        "kind": "real",
        "item_group": None,
        "fields": dict(zip(names, values, strict=True)),
        "field_types": TYPES,
        **extra,
    }


def rows_of(answers: dict[str, dict[str, tuple[Any, ...]]], group: str = "crowd") -> list[dict]:
    return [
        row(n, worker, item, values, group)
        for n, (worker, item, values) in enumerate(
            (w, i, v) for w, items in answers.items() for i, v in items.items()
        )
    ]


def field(part: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in part["fields"] if f["id"] == name)


def matrix(values: dict[str, dict[Any, float]], units: list[Any]) -> np.ndarray:
    """Raters x units, NaN where a rater gave no value: krippendorff's own input."""
    return np.array(
        [[by_unit.get(unit, np.nan) for unit in units] for by_unit in values.values()], dtype=float
    )


def by_field(index: int, convert: Any) -> dict[str, dict[Any, float]]:
    out: dict[str, dict[Any, float]] = {}
    for worker, items in ANSWERS.items():
        for item, values in items.items():
            if values[index] is not None:
                out.setdefault(worker, {}).update(convert(item, values[index]))
    return out


def test_each_field_kind_gets_the_alpha_level_that_fits_it() -> None:
    full = analyze(rows_of(ANSWERS), set(), {"fields": FIELDS})["full"]
    items = ["i1", "i2", "i3"]

    # rating: ordinal (and interval beside it) over items.
    quality = field(full, "quality")
    data = matrix(by_field(0, lambda i, v: {i: v}), items)
    assert quality["agreement"]["level"] == "ordinal"
    assert quality["agreement"]["alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal"), abs=1e-4
    )
    assert quality["agreement"]["alpha_interval"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="interval"), abs=1e-4
    )
    # Exact agreement over pairs of answers: i1 (5,4,5) 1 of 3, i2 (2,1,3) 0 of 3, i3 1 of 1.
    assert quality["agreement"]["exact"] == pytest.approx(2 / 7, abs=1e-4)
    assert quality["agreement"]["n_pairs"] == 7
    hist = {h["value"]: h["count"] for h in quality["distribution"]["histogram"]}
    assert hist == {1: 1, 2: 1, 3: 1, 4: 3, 5: 2}
    all_ratings = [5, 2, 4, 4, 1, 4, 5, 3]
    assert quality["distribution"]["mean"] == pytest.approx(np.mean(all_ratings), abs=1e-4)
    assert quality["distribution"]["std"] == pytest.approx(np.std(all_ratings, ddof=1), abs=1e-4)

    # single-choice category: nominal over items.
    codes = {"news": 0, "sport": 1, "art": 2}
    topic = field(full, "topic")
    data = matrix(by_field(1, lambda i, v: {i: codes[v[0]]}), items)
    assert topic["agreement"]["level"] == "nominal"
    assert topic["agreement"]["alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-4
    )
    assert "per_choice" not in topic["agreement"]
    rates = {c["value"]: c["rate"] for c in topic["distribution"]["choices"]}
    assert rates == {"news": 0.375, "sport": 0.375, "art": 0.25}

    # multi-choice category: nominal on each choice's selected/not, per choice and pooled.
    flaws = field(full, "flaws")
    choices = ["typo", "bias", "true"]  # value texts, booleans as "true"
    assert flaws["choices"] == choices
    binary = by_field(2, lambda i, v: {(i, c): float(c in v) for c in choices})
    units = [(i, c) for i in items for c in choices]
    assert flaws["agreement"]["level"] == "nominal"
    assert flaws["agreement"]["alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=matrix(binary, units), level_of_measurement="nominal"),
        abs=1e-4,
    )
    for entry in flaws["agreement"]["per_choice"]:
        one = [(i, entry["choice"]) for i in items]
        expected = krippendorff.alpha(
            reliability_data=matrix(binary, one), level_of_measurement="nominal"
        )
        assert entry["alpha"] == pytest.approx(expected, abs=1e-4), entry
    rates = {c["value"]: c["rate"] for c in flaws["distribution"]["choices"]}
    assert rates == {"typo": 0.375, "bias": 0.5, "true": 0.25}
    assert flaws["distribution"]["n_none"] == 2

    # rank: ordinal on each candidate's position (1 = best), per candidate and pooled.
    order = field(full, "order")
    positions = by_field(3, lambda i, v: {(i, "abc"[idx]): p + 1 for p, idx in enumerate(v)})
    units = [(i, c) for i in items for c in "abc"]
    assert order["agreement"]["level"] == "ordinal"
    assert order["agreement"]["alpha"] == pytest.approx(
        krippendorff.alpha(
            reliability_data=matrix(positions, units), level_of_measurement="ordinal"
        ),
        abs=1e-4,
    )
    for entry in order["agreement"]["per_choice"]:
        one = [(i, entry["choice"]) for i in items]
        expected = krippendorff.alpha(
            reliability_data=matrix(positions, one), level_of_measurement="ordinal"
        )
        assert entry["alpha"] == pytest.approx(expected, abs=1e-4), entry
    mean_rank = {c["value"]: c["mean_rank"] for c in order["distribution"]["choices"]}
    # "a" is ranked 1, 3, 2, 1, 2, 2, 2, 3 -> 16/8.
    assert mean_rank["a"] == pytest.approx(16 / 8, abs=1e-4)
    # Equal rankings: one pair on i2, one on i3, of 7 pairs.
    assert order["agreement"]["exact"] == pytest.approx(2 / 7, abs=1e-4)

    # text: lengths, no agreement.
    why = field(full, "why")
    lengths = [len(t) for t in ("fine", "bad text", "ok", "good", "okay then", "x", "y")]
    assert why["agreement"]["alpha"] is None and why["agreement"]["exact"] is None
    assert why["distribution"]["n"] == 7 and why["n_missing"] == 1
    assert why["distribution"]["mean"] == pytest.approx(np.mean(lengths), abs=1e-4)
    assert why["distribution"]["max"] == 9


def test_fields_keep_the_study_order_and_undefined_alpha_says_why() -> None:
    same = {"w1": {"i1": ANSWERS["w1"]["i1"]}, "w2": {"i1": ANSWERS["w1"]["i1"]}}
    full = analyze(rows_of(same), set(), {"fields": FIELDS})["full"]
    assert [f["id"] for f in full["fields"]] == [f["id"] for f in FIELDS]
    quality = field(full, "quality")["agreement"]
    assert quality["alpha"] is None and "same" in quality["alpha_note"]
    assert quality["exact"] == 1.0
    lone = analyze(rows_of({"w1": ANSWERS["w1"]}), set(), {})["full"]
    assert "two answers" in field(lone, "topic")["agreement"]["alpha_note"]


def test_the_filtered_set_leaves_excluded_workers_out() -> None:
    rows = rows_of(ANSWERS)
    data = analyze(rows, {"w3"}, {"fields": FIELDS})
    assert data["full"]["counts"]["n_workers"] == 3
    assert data["filtered"]["counts"]["n_workers"] == 2
    assert data["filtered"]["counts"]["n_responses"] == 6
    assert data["excluded"] == {
        "n_workers": 1,
        "n_responses": 2,
        "by_rater_group": {"crowd": {"n_workers": 1, "n_responses": 2}},
    }
    kept = {w: ANSWERS[w] for w in ("w1", "w2")}
    data_kept = matrix(
        {w: {i: v[0] for i, v in items.items()} for w, items in kept.items()}, ["i1", "i2", "i3"]
    )
    filtered = field(data["filtered"], "quality")
    assert filtered["agreement"]["alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=data_kept, level_of_measurement="ordinal"), abs=1e-4
    )
    assert filtered["agreement"]["alpha"] != field(data["full"], "quality")["agreement"]["alpha"]
    assert filtered["distribution"]["mean"] == pytest.approx(np.mean([5, 2, 4, 4, 1, 4]), abs=1e-4)


def test_rater_groups_are_described_and_compared() -> None:
    experts: dict[str, dict[str, tuple[Any, ...]]] = {
        "e1": {"i1": (5, ["news"], [], [0, 1, 2], "a"), "i2": (1, ["art"], [], [2, 1, 0], "b")},
        "e2": {"i1": (4, ["news"], [], [0, 1, 2], "c"), "i2": (2, ["art"], [], [2, 0, 1], "d")},
        "e3": {"i3": (3, ["art"], [], [1, 0, 2], "e")},
    }
    rows = rows_of(ANSWERS) + [
        {**r, "response_id": 100 + r["response_id"]} for r in rows_of(experts, group="expert")
    ]
    full = analyze(rows, set(), {"fields": FIELDS})["full"]
    assert full["rater_groups"] == ["crowd", "expert"]
    assert full["counts"]["by_rater_group"]["expert"] == {
        "n_responses": 5,
        "n_workers": 3,
        "n_items": 3,
    }
    quality = field(full, "quality")
    groups = {g["rater_group"]: g for g in quality["by_rater_group"]}
    assert groups["expert"]["distribution"]["mean"] == pytest.approx(3.0)
    assert groups["crowd"]["distribution"]["mean"] == pytest.approx(
        np.mean([5, 2, 4, 4, 1, 4, 5, 3])
    )
    (between,) = quality["between_groups"]
    assert (between["group_a"], between["group_b"], between["n_items"]) == ("crowd", "expert", 3)
    # Cross-group pairs: i1 crowd (5,4,5) x expert (5,4): 3 equal of 6; i2 (2,1,3) x (1,2): 2 of 6;
    # i3 (4,4) x (3): 0 of 2.
    assert between["exact"] == pytest.approx(5 / 14, abs=1e-4)
    crowd_means = [np.mean([5, 4, 5]), np.mean([2, 1, 3]), 4.0]
    expert_means = [4.5, 1.5, 3.0]
    tau = stats.kendalltau(crowd_means, expert_means).statistic
    assert between["tau"] == pytest.approx(tau, abs=1e-4)
    # Topic's most common answer per item: crowd news, sport, (art|news tie -> 'art'),
    # experts news, art, art: two of three items agree.
    (topic,) = field(full, "topic")["between_groups"]
    assert topic["modal_agreement"] == pytest.approx(2 / 3, abs=1e-4)
    assert "tau" not in topic
    expert_topic = next(
        g for g in field(full, "topic")["by_rater_group"] if g["rater_group"] == "expert"
    )
    assert expert_topic["agreement"]["exact"] == 1.0


def test_a_field_only_some_items_declare_is_analysed_over_those_items() -> None:
    own = field_types_of(
        [*FIELDS[:1], {"id": "fact", "type": "rating", "title": "Factual?", "scale": [0, 2]}]
    )
    rows = rows_of(ANSWERS)
    rows += [
        {**row(50 + n, w, "i9", ANSWERS["w1"]["i1"]), "fields": {"quality": 3, "fact": v},
         "field_types": own}
        for n, (w, v) in enumerate([("w1", 2), ("w2", 2), ("w3", 0)])
    ]  # fmt: skip
    full = analyze(rows, set(), {"fields": FIELDS})["full"]
    fact = field(full, "fact")
    assert fact["n_answers"] == 3 and fact["n_missing"] == 0
    assert fact["agreement"]["n_items"] == 1
    assert fact["scale"] == [0, 2]
    assert {h["value"] for h in fact["distribution"]["histogram"]} == {0, 1, 2}
    # Items without the topic field do not count it as missing.
    assert field(full, "topic")["n_missing"] == 0
    assert field(full, "topic")["agreement"]["n_items"] == 3
    assert field(full, "quality")["agreement"]["n_items"] == 4
    assert [f["id"] for f in full["fields"]][-1] == "fact"


def test_counts_attention_and_gold() -> None:
    rows = rows_of(ANSWERS)
    rows[0].update(kind="gold", score=1.0)
    rows[3].update(kind="gold", score=0.5)
    rows.append({**row(90, "w1", "att", ANSWERS["w1"]["i1"]), "kind": "attention",
                 "attention_passed": True})  # fmt: skip
    rows.append({**row(91, "w3", "att", ANSWERS["w1"]["i1"]), "kind": "attention",
                 "attention_passed": False})  # fmt: skip
    rows.append({**row(92, "w2", "att", ANSWERS["w1"]["i1"]), "kind": "attention",
                 "attention_passed": None})  # fmt: skip
    data = analyze(rows, {"w3"}, {})
    assert data["attention"]["n_checks"] == 2
    assert data["attention"]["pass_rate"] == 0.5
    assert data["attention"]["failed_workers"] == ["w3"]
    assert data["full"]["gold"] == {"n": 2, "mean_score": 0.75}
    # Attention rows are not answers to analyse.
    assert data["full"]["counts"] == {
        "n_responses": 8,
        "n_workers": 3,
        "n_items": 3,
        "by_rater_group": {"crowd": {"n_responses": 8, "n_workers": 3, "n_items": 3}},
    }
    assert not math.isnan(field(data["full"], "quality")["agreement"]["alpha"])


def test_a_row_without_field_types_is_refused() -> None:
    bad = row(1, "w1", "i1", ANSWERS["w1"]["i1"])
    del bad["field_types"]
    with pytest.raises(ValueError, match="field_types"):
        analyze([bad], set(), {})
    odd = {**row(1, "w1", "i1", ANSWERS["w1"]["i1"]), "field_types": {"x": {"type": "slider"}}}
    with pytest.raises(ValueError, match="slider"):
        analyze([odd], set(), {})


def test_analysis_row_carries_the_answer_and_its_declarations() -> None:
    stored = {
        "response_id": 7,
        "worker": "local:w1",
        "item": "i1",
        "kind": "gold",
        "meta": {"group": "gpt2"},
        "answer": {"fields": {"quality": 4, "topic": ["news"]}},
        "qc_flags": {"attention_passed": True},
        "score": 0.5,
        "position": 2,
        "created_at": "2024-05-01T12:00:00",
        "source": "imported",
        "rater_group": "expert",
    }
    got = analysis_row(stored, TYPES)
    assert got == {
        "response_id": 7,
        "worker": "local:w1",
        "rater_group": "expert",
        "item": "i1",
        "kind": "gold",
        "item_group": "gpt2",
        "fields": {"quality": 4, "topic": ["news"]},
        "field_types": TYPES,
        "attention_passed": True,
        "score": 0.5,
        "position": 2,
        "created_at": "2024-05-01T12:00:00",
        "source": "imported",
    }
    assert TYPES["flaws"] == {
        "type": "category", "title": "Flaws", "choices": ["typo", "bias", "true"],
        "max_choices": 3,
    }  # fmt: skip
    ranked = field_types_of([{"id": "r", "type": "rank", "title": "R"}], n_attachments=3)
    assert ranked["r"]["choices"] == ["0", "1", "2"]


def test_ordinal_mean_applies_to_rating_fields_only() -> None:
    assert label_applies("ordinal_mean", "quality", TYPES)
    for name in ("topic", "flaws", "order", "unknown"):
        assert not label_applies("ordinal_mean", name, TYPES)
        assert label_applies("majority_vote", name, TYPES)
        assert label_applies("dawid_skene", name, TYPES)
