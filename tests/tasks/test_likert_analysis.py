"""Every number of the Likert analysis, against hand-worked cases and direct library calls."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from scipy import stats

from tasks.likert import analysis
from tasks.likert.report import PLOT_FILES, render_report

ATTRS = ("fluency", "meaning")


def row(
    worker: str,
    item: str,
    ratings: dict[str, Any],
    rater_group: str = "crowd",
    item_group: str | None = "human",
    kind: str = "real",
    **extra: Any,
) -> dict[str, Any]:
    row.counter += 1  # type: ignore[attr-defined]
    return {
        "response_id": row.counter,  # type: ignore[attr-defined]
        "worker": worker,
        "item": item,
        "kind": kind,
        "rater_group": rater_group,
        "item_group": item_group,
        "ratings": ratings,
        "scales": {name: [1, 5] for name in ratings},
        **extra,
    }


row.counter = 0  # type: ignore[attr-defined]


def find(entries: list[dict[str, Any]], **keys: Any) -> dict[str, Any]:
    matches = [e for e in entries if all(e.get(k) == v for k, v in keys.items())]
    assert len(matches) == 1, (keys, matches)
    return matches[0]


def hand_rows() -> list[dict[str, Any]]:
    """Two raters, three items: A rates 1, 2, 3 and B rates 1, 3, 3."""
    a, b = (1, 2, 3), (1, 3, 3)
    return [row("A", f"i{n}", {"fluency": a[n]}) for n in range(3)] + [
        row("B", f"i{n}", {"fluency": b[n]}) for n in range(3)
    ]


def test_two_raters_three_items_worked_by_hand() -> None:
    s = analysis.summarize(hand_rows())
    d = find(s["descriptives"], rater_group="crowd", item_group="human", attribute="fluency")
    # Values 1,1,2,3,3,3: mean 13/6; squares sum 33, so SS = 33 - 6*(13/6)^2 = 29/6, var 29/30.
    assert d["n"] == 6
    assert d["mean"] == pytest.approx(13 / 6, abs=1e-4)
    assert d["std"] == pytest.approx(math.sqrt(29 / 30), abs=1e-4)
    ag = find(s["agreement"], rater_group="crowd", item_group="human", attribute="fluency")
    # Interval: Do = (1/n) sum_u 1/(m_u-1) sum of ordered within-unit (c-k)^2 = (1/6)*2 = 1/3.
    # De = sum over ordered pairs of all 6 values of (c-k)^2 / (n(n-1)): unordered pairs
    # give 2*1 (1 vs 2) + 6*4 (1 vs 3) + 3*1 (2 vs 3) = 29, ordered 58, De = 58/30.
    # alpha = 1 - (1/3)/(58/30) = 24/29.
    assert ag["alpha_interval"] == pytest.approx(24 / 29, abs=1e-4)
    # Ordinal: n1=2, n2=1, n3=3; d(c,k) = (sum_{g=c..k} n_g - (n_c+n_k)/2)^2, so d(1,2)=2.25,
    # d(2,3)=4, d(1,3)=12.25. Do = (1/6)*2*4 = 4/3; De = (2/30)*(2*2.25 + 6*12.25 + 3*4) = 6.
    # alpha = 1 - (4/3)/6 = 7/9.
    assert ag["alpha_ordinal"] == pytest.approx(7 / 9, abs=1e-4)
    # Items i0 and i2 got the same rating from both, i1 did not.
    assert ag["exact"] == pytest.approx(2 / 3, abs=1e-4)
    assert ag["n_items_multi"] == 3 and ag["alpha_note"] is None
    # Bias: A is 0, -1, 0 against B, B is the mirror image.
    bias = {b["worker"]: b for b in s["rater_bias"]}
    assert bias["A"]["bias"] == pytest.approx(-1 / 3, abs=1e-4) and bias["A"]["n"] == 3
    assert bias["B"]["bias"] == pytest.approx(1 / 3, abs=1e-4)
    assert bias["A"]["mean"] == 2 and bias["B"]["mean"] == pytest.approx(7 / 3, abs=1e-4)
    # Kendall's tau-b: pairs (i0,i1), (i0,i2) concordant, (i1,i2) tied in B only:
    # (2 - 0) / sqrt(3 * 2).
    within = find(s["tau_within_groups"], rater_group="crowd", attribute="fluency")
    assert within["mean_tau"] == pytest.approx(2 / math.sqrt(6), abs=1e-4)
    assert within["n_pairs"] == 1 and within["n_undefined"] == 0
    # The same numbers straight from the libraries.
    assert ag["alpha_interval"] == pytest.approx(
        krippendorff.alpha(
            reliability_data=[[1, 2, 3], [1, 3, 3]], level_of_measurement="interval"
        ),
        abs=1e-4,
    )
    assert ag["alpha_ordinal"] == pytest.approx(
        krippendorff.alpha(reliability_data=[[1, 2, 3], [1, 3, 3]], level_of_measurement="ordinal"),
        abs=1e-4,
    )


def random_rows(seed: int = 3) -> list[dict[str, Any]]:
    """Crowd workers rating random subsets, experts rating everything, some ratings missing."""
    rng = random.Random(seed)
    items = [(f"t{n}", "human" if n % 2 else "gpt2") for n in range(12)]
    rows = []
    for worker in range(7):
        for item, group in rng.sample(items, 7):
            ratings = {a: (rng.randint(1, 5) if rng.random() > 0.1 else None) for a in ATTRS}
            rows.append(row(f"c{worker}", item, ratings, "crowd", group))
    for worker in range(3):
        for item, group in items:
            base = 4 if group == "human" else 2
            ratings = {a: min(5, max(1, base + rng.choice((-1, 0, 0, 1)))) for a in ATTRS}
            rows.append(row(f"e{worker}", item, ratings, "expert", group))
    return rows


def matrix(rows: list[dict[str, Any]], group: str, attribute: str, item_group: str | None = None):
    """Reliability data (raters x items, NaN = missing) built independently of the module."""
    chosen = [
        r
        for r in rows
        if r["rater_group"] == group and (item_group is None or r["item_group"] == item_group)
    ]
    workers = sorted({r["worker"] for r in chosen})
    items = sorted({r["item"] for r in chosen})
    data = np.full((len(workers), len(items)), np.nan)
    for r in chosen:
        if r["ratings"].get(attribute) is not None:
            data[workers.index(r["worker"]), items.index(r["item"])] = r["ratings"][attribute]
    return data


def test_numbers_match_krippendorff_and_scipy_called_directly() -> None:
    rows = random_rows()
    s = analysis.summarize(rows)
    assert s["rater_groups"] == ["crowd", "expert"] and s["item_groups"] == ["gpt2", "human"]
    assert s["attributes"] == list(ATTRS)
    for group in ("crowd", "expert"):
        for attribute in ATTRS:
            for item_group in (None, "human", "gpt2"):
                data = matrix(rows, group, attribute, item_group)
                ag = find(
                    s["agreement"], rater_group=group, item_group=item_group, attribute=attribute
                )
                for level in ("ordinal", "interval"):
                    expected = krippendorff.alpha(
                        reliability_data=data,
                        level_of_measurement=level,
                        value_domain=[1, 2, 3, 4, 5],
                    )
                    assert ag[f"alpha_{level}"] == pytest.approx(expected, abs=1e-4)
                values = data[~np.isnan(data)]
                d = find(
                    s["descriptives"],
                    rater_group=group,
                    item_group=item_group,
                    attribute=attribute,
                )
                assert d["n"] == values.size
                assert d["mean"] == pytest.approx(values.mean(), abs=1e-4)
                assert d["std"] == pytest.approx(values.std(ddof=1), abs=1e-4)
                columns = [data[:, j][~np.isnan(data[:, j])] for j in range(data.shape[1])]
                multi = [c for c in columns if c.size >= 2]
                same = sum(1 for c in multi if len(set(c)) == 1)
                assert ag["exact"] == pytest.approx(same / len(multi), abs=1e-4)

    for attribute in ATTRS:
        crowd, expert = matrix(rows, "crowd", attribute), matrix(rows, "expert", attribute)
        crowd_means = np.nanmean(np.where(np.isnan(crowd), np.nan, crowd), axis=0)
        # Both matrices list items sorted; crowd may miss items (random subsets).
        crowd_items = sorted({r["item"] for r in rows if r["rater_group"] == "crowd"})
        expert_items = sorted({r["item"] for r in rows if r["rater_group"] == "expert"})
        pairs = [
            (crowd_means[crowd_items.index(i)], np.nanmean(expert[:, expert_items.index(i)]))
            for i in crowd_items
            if i in expert_items and not np.isnan(crowd_means[crowd_items.index(i)])
        ]
        result = stats.kendalltau([p[0] for p in pairs], [p[1] for p in pairs])
        tau = find(s["tau_between_groups"], group_a="crowd", group_b="expert", attribute=attribute)
        assert tau["n_items"] == len(pairs)
        assert tau["tau"] == pytest.approx(result.statistic, abs=1e-4)
        assert tau["p"] == pytest.approx(result.pvalue, rel=1e-3)

        for group in ("crowd", "expert"):
            a = [
                r["ratings"][attribute]
                for r in rows
                if r["rater_group"] == group
                and r["item_group"] == "gpt2"
                and r["ratings"][attribute] is not None
            ]
            b = [
                r["ratings"][attribute]
                for r in rows
                if r["rater_group"] == group
                and r["item_group"] == "human"
                and r["ratings"][attribute] is not None
            ]
            test = stats.ttest_ind(a, b, equal_var=False)
            w = find(s["welch"], rater_group=group, attribute=attribute)
            assert (w["group_a"], w["group_b"], w["n1"], w["n2"]) == (
                "gpt2",
                "human",
                len(a),
                len(b),
            )
            assert w["t"] == pytest.approx(test.statistic, abs=1e-4)
            assert w["p"] == pytest.approx(test.pvalue, rel=1e-3)

            # Mean pairwise tau between raters, pair by pair.
            data = matrix(rows, group, attribute)
            taus, undefined = [], 0
            for i in range(data.shape[0]):
                for j in range(i + 1, data.shape[0]):
                    both = ~np.isnan(data[i]) & ~np.isnan(data[j])
                    if both.sum() < 2:
                        continue
                    value = stats.kendalltau(data[i][both], data[j][both]).statistic
                    if np.isnan(value):
                        undefined += 1
                    else:
                        taus.append(value)
            within = find(s["tau_within_groups"], rater_group=group, attribute=attribute)
            assert within["n_pairs"] == len(taus) and within["n_undefined"] == undefined
            assert within["mean_tau"] == pytest.approx(np.mean(taus), abs=1e-4)

    # Experts rated human stories (base 4) far above GPT-2 ones (base 2).
    expert_welch = find(s["welch"], rater_group="expert", attribute="fluency")
    assert expert_welch["t"] < -5 and expert_welch["p"] < 1e-6


def test_rater_bias_against_the_other_raters_of_the_group() -> None:
    rows = random_rows()
    s = analysis.summarize(rows)
    for entry in s["rater_bias"]:
        mine = [r for r in rows if r["worker"] == entry["worker"]]
        diffs = []
        for r in mine:
            value = r["ratings"][entry["attribute"]]
            if value is None:
                continue
            others = [
                o["ratings"][entry["attribute"]]
                for o in rows
                if o["item"] == r["item"]
                and o["worker"] != r["worker"]
                and o["rater_group"] == r["rater_group"]
                and o["ratings"][entry["attribute"]] is not None
            ]
            if others:
                diffs.append(value - np.mean(others))
        assert entry["n"] == len(diffs)
        assert entry["bias"] == pytest.approx(np.mean(diffs), abs=1e-4)


def test_edge_cases_give_none_not_nan_or_a_crash() -> None:
    rows = [
        # One rater only on item x: nothing to agree on, no bias to compute.
        row("A", "x", {"fluency": 3, "meaning": None}),
        # Constant ratings on item y: exact agreement, but alpha is undefined.
        row("A", "y", {"fluency": 4, "meaning": 2}),
        row("B", "y", {"fluency": 4, "meaning": None}),
    ]
    data = analysis.analyze(rows, set())
    json.dumps(data, allow_nan=False)
    s = data["full"]
    fluency = find(s["agreement"], rater_group="crowd", item_group="human", attribute="fluency")
    assert fluency["alpha_interval"] is None and fluency["alpha_ordinal"] is None
    assert "same" in fluency["alpha_note"]
    assert fluency["exact"] == 1.0 and fluency["n_items_multi"] == 1
    meaning = find(s["agreement"], rater_group="crowd", item_group="human", attribute="meaning")
    assert meaning["alpha_interval"] is None and "two ratings" in meaning["alpha_note"]
    assert meaning["exact"] is None
    # Missing ratings are skipped: one meaning rating, so no std.
    d = find(s["descriptives"], rater_group="crowd", item_group="human", attribute="meaning")
    assert (d["n"], d["mean"], d["std"]) == (1, 2.0, None)
    assert s["counts"]["n_missing"] == 2 and s["counts"]["n_ratings"] == 4
    # A single rater group and a single item group: no pairs to compare.
    assert s["tau_between_groups"] == [] and s["welch"] == []
    # Only one item group: the table has no separate "all item groups" row.
    assert [(t["rater_group"], t["item_group"]) for t in s["table"]] == [("crowd", "human")]
    # Tau within: A and B share only item y, fewer than 2 items, so no pair counts.
    within = find(s["tau_within_groups"], attribute="fluency")
    assert within["mean_tau"] is None and within["n_pairs"] == 0
    bias = {(b["worker"], b["attribute"]): b for b in s["rater_bias"]}
    assert bias[("A", "fluency")]["bias"] == 0 and bias[("A", "fluency")]["n"] == 1
    assert bias[("A", "meaning")]["bias"] is None and bias[("A", "meaning")]["n"] == 0


def test_constant_raters_make_tau_undefined_and_are_counted() -> None:
    rows = [row("A", f"i{n}", {"fluency": 3}) for n in range(3)] + [
        row("B", f"i{n}", {"fluency": n + 1}) for n in range(3)
    ]
    within = find(analysis.summarize(rows)["tau_within_groups"], attribute="fluency")
    assert within["n_undefined"] == 1 and within["n_pairs"] == 0 and within["mean_tau"] is None


def test_constant_groups_in_welch_and_tau_between() -> None:
    rows = [
        row("A", "h1", {"fluency": 5}, item_group="human"),
        row("A", "h2", {"fluency": 5}, item_group="human"),
        row("A", "g1", {"fluency": 2}, item_group="gpt2"),
        row("A", "g2", {"fluency": 2}, item_group="gpt2"),
        row("E", "h1", {"fluency": 4}, rater_group="expert"),
        row("E", "h2", {"fluency": 4}, rater_group="expert"),
    ]
    s = analysis.summarize(rows)
    w = find(s["welch"], rater_group="crowd", attribute="fluency")
    assert w["t"] is None and w["p"] is None and "constant" in w["note"]
    assert (w["mean_a"], w["mean_b"], w["n1"], w["n2"]) == (2.0, 5.0, 2, 2)
    tau = find(s["tau_between_groups"], attribute="fluency")
    assert tau["tau"] is None and tau["n_items"] == 2 and tau["note"]
    json.dumps(s, allow_nan=False)


def test_half_ratings_from_imports_count_at_their_value() -> None:
    rows = [
        row("A", "i1", {"fluency": 3.5}, rater_group="llm:x"),
        row("B", "i1", {"fluency": 4}, rater_group="llm:x"),
        row("A", "i2", {"fluency": 1}, rater_group="llm:x"),
        row("B", "i2", {"fluency": 1.5}, rater_group="llm:x"),
    ]
    ag = find(
        analysis.summarize(rows)["agreement"],
        rater_group="llm:x",
        item_group=None,
        attribute="fluency",
    )
    expected = krippendorff.alpha(
        reliability_data=[[3.5, 1], [4, 1.5]], level_of_measurement="interval"
    )
    assert ag["alpha_interval"] == pytest.approx(expected, abs=1e-4)


def test_attention_rows_are_summarised_apart_and_the_filter_applies() -> None:
    rows = hand_rows() + [
        row("A", "check", {"fluency": 2}, kind="attention", item_group=None, attention_passed=True),
        row(
            "B", "check", {"fluency": 5}, kind="attention", item_group=None, attention_passed=False
        ),
        # An imported row without the stored verdict falls back on expected_rating.
        row("C", "check", {"fluency": 1}, kind="attention", item_group=None, expected_rating=2),
    ]
    data = analysis.analyze(rows, {"B", "C"})
    assert data["attention"]["n_checks"] == 3
    assert data["attention"]["failed_workers"] == ["B", "C"]
    assert data["attention"]["workers_checked"] == 3
    assert data["full"]["counts"]["n_items"] == 3  # the check is not a rated item
    assert data["full"]["counts"]["n_raters"] == 2
    assert data["filtered"]["counts"]["n_raters"] == 1
    assert data["excluded"] == {
        "n_workers": 2,
        "n_responses": 5,
        "by_rater_group": {"crowd": {"n_workers": 2, "n_responses": 5}},
    }
    # With only A left, there is no agreement, but the means still come out.
    d = find(data["filtered"]["descriptives"], item_group="human", attribute="fluency")
    assert d["mean"] == 2.0 and d["n"] == 3


def test_bad_rows_are_rejected_with_a_fix() -> None:
    with pytest.raises(ValueError, match="lacks ratings"):
        analysis.analyze([{"response_id": 1, "worker": "a", "item": "x", "kind": "real"}], set())
    with pytest.raises(ValueError, match="a rating is a number"):
        analysis.analyze([row("a", "x", {"fluency": "4"})], set())
    with pytest.raises(ValueError, match="use one of"):
        analysis.analyze([row("a", "x", {"fluency": 4}, kind="odd")], set())


def test_empty_study_analyses_and_renders(tmp_path: Path) -> None:
    data = analysis.analyze([], set())
    json.dumps(data, allow_nan=False)
    assert data["full"]["counts"]["n_ratings"] == 0
    html = render_report(data, tmp_path, "empty")
    assert "no data" in html
    assert all((tmp_path / name).exists() for name in PLOT_FILES.values())


def test_report_has_the_tables_plots_and_filter_counts(tmp_path: Path) -> None:
    data = analysis.analyze(random_rows(), {"c0"})
    data["rules"] = {"attention_check": {"workers": 1, "responses": 7}}
    data["study"] = {"config": {"template": "attack", "annotations_per_item": 3}}
    html = render_report(data, tmp_path, "Likert <study>")
    assert "Likert &lt;study&gt;" in html
    for heading in ("Kendall", "Welch", "Rater bias", "Krippendorff", "attention_check"):
        assert heading in html
    assert html.count("data:image/png;base64,") == len(PLOT_FILES) >= 2
    for name in PLOT_FILES.values():
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG")
    # The paper-style table: one row per rater group x item group (plus "all").
    table = data["full"]["table"]
    assert [(t["rater_group"], t["item_group"]) for t in table] == [
        ("crowd", "gpt2"), ("crowd", "human"), ("crowd", None),
        ("expert", "gpt2"), ("expert", "human"), ("expert", None),
    ]  # fmt: skip
    cell = table[0]["cells"]["fluency"]
    d = find(
        data["full"]["descriptives"], rater_group="crowd", item_group="gpt2", attribute="fluency"
    )
    assert (cell["mean"], cell["std"], cell["n"]) == (d["mean"], d["std"], d["n"])
    assert set(cell) == {"mean", "std", "n", "alpha_interval", "alpha_ordinal", "exact"}
